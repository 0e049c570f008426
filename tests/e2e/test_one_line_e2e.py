"""End to end: the one-line change. mmpretrain's own DeiT-T and Swin-T
ImageNet configs with ``model = dict(type='TLAlignClassifier')`` on top,
nothing else, train through ``tools/train.py`` with TL-Align targets: the
recipe's own ``Mixup`` / ``CutMix`` are mixed by their recording variants,
and the logged ``label_drift/abs_diff`` shows a target that is not the area
target. (A probs list and ResizeMix through the same path, at the loss:
tests/mixing/test_resizemix.py.)

Changed for CPU time, as in the other e2e tests (``tests/downstream/
tiny.py``): the data root, the image scale (/7: 224 -> 32), a tiny arch of
the same model (the head's ``in_channels`` follows), no workers, the
schedule (:func:`two_short_epochs`: 4 iterations of 3 images), and a fixed
seed (mmpretrain's runtime leaves it unset), with which CutMix, not only
Mixup, is drawn in these 4 iterations.
"""
import pytest
from mmengine.config import Config

from tests.downstream import e2e
from tests.downstream.tiny import dump, shrink, tiny_width

from .test_timm_e2e import two_short_epochs, write_imagenet

ONE_LINE = """_base_ = ['mmpretrain::{}']
model = dict(type='TLAlignClassifier')
"""
TINY_DEIT = dict(arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                           feedforward_channels=64), patch_size=8)
# two stages of 8x8 and 4x4 tokens, windows of 4
TINY_SWIN = dict(arch=dict(embed_dims=16, depths=[1, 1], num_heads=[1, 2]),
                 window_size=4, out_indices=(1, ))


@pytest.mark.e2e
@pytest.mark.parametrize('recipe,tiny', [
    ('deit/deit-tiny_4xb256_in1k.py', TINY_DEIT),
    ('swin_transformer/swin-tiny_16xb64_in1k.py', TINY_SWIN),
], ids=['deit-tiny', 'swin-tiny'])
def test_an_mmpretrain_recipe_plus_one_line_trains_with_tlalign(
        tmp_path, recipe, tiny):
    one_line = tmp_path / 'one_line.py'
    one_line.write_text(ONE_LINE.format(recipe))
    work = str(tmp_path / 'work')
    cfg = shrink(Config.fromfile(str(one_line)),
                 write_imagenet(str(tmp_path / 'imagenet')), factor=7,
                 work_dir=work)
    assert cfg.model.type == 'TLAlignClassifier'
    assert [a.type for a in cfg.model.train_cfg.augments] == [
        'Mixup', 'CutMix']  # mmpretrain's own names
    cfg.model.backbone.update(tiny)
    cfg.model.head.in_channels = tiny_width(tiny['arch'])
    two_short_epochs(cfg)
    cfg.randomness = dict(seed=0)

    e2e.train(dump(cfg, str(tmp_path / 'tiny.py')), work)
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2, 3, 4]
    assert all(r['loss'] == r['loss'] for r in records)  # not NaN
    drift = [r['label_drift/abs_diff'] for r in records]
    assert min(drift) >= 0 and max(drift) > 1e-4, drift
