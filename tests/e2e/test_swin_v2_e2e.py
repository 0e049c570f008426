"""End to end: the real config ``configs/tlalign/swinv2-tiny-w8_16xb64-
tlalign_in1k-256px.py`` (TL-Align on mmpretrain's SwinTransformerV2)
trained through ``tools/train.py``, resumed through ``tools/train.py
--resume`` (a strict load of V2's own checkpoint) and tested through
``tools/test.py`` on a tiny ImageNet in its real layout.

Changed for CPU time, as in ``test_timm_e2e.py``: the data root, the image
scale (/4: 256 -> 64, so ``img_size=64``), a tiny arch of the same model
(the four stages, width 16; the head's ``in_channels`` follows) with
windows ``[4, 4, 4, 2]`` for the 16, 8, 4, 2 token maps (the recipe's
window 8 needs maps of at least 8), no workers, and the schedule: 2
epochs of 2 iterations (batch 3), the warm-up in the first and the cosine
decay in the second (the recipe's are 20 and 280 epochs).
"""
import os.path as osp
import sys

import pytest
from mmengine.config import Config

import tlalign_mm  # noqa: F401  (registers; allow-lists checkpoints)
from tests.downstream import e2e
from tests.downstream.tiny import config_path, dump, shrink

from .test_timm_e2e import two_short_epochs, write_imagenet

CONFIG = config_path('tlalign', 'swinv2-tiny-w8_16xb64-tlalign_in1k-256px.py')
TINY = dict(embed_dims=16, depths=[1, 1, 2, 1], num_heads=[1, 2, 2, 4],
            extra_norm_every_n_blocks=0)


@pytest.mark.e2e
def test_swin_v2_tlalign_trains_resumes_and_tests(tmp_path):
    data = write_imagenet(str(tmp_path / 'imagenet'))
    work = str(tmp_path / 'work')
    cfg = shrink(Config.fromfile(CONFIG), data, factor=4, work_dir=work)
    assert cfg.model.type == 'TLAlignClassifier'
    assert cfg.model.backbone.type == 'SwinTransformerV2'
    assert cfg.model.backbone.img_size == 64
    cfg.model.backbone.update(arch=TINY, window_size=[4, 4, 4, 2])
    cfg.model.head.in_channels = TINY['embed_dims'] * 8
    two_short_epochs(cfg)
    config = dump(cfg, str(tmp_path / 'swinv2_tiny.py'))

    e2e.train(config, work)
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2, 3, 4]
    for record in records:
        assert record['loss'] == record['loss']  # not NaN
        # The TL-Align target was computed (the loss dict carries it).
        assert 'label_drift/abs_diff' in record
    # Epoch 2 again from epoch_1.pth, which CheckpointSafetyHook loads
    # strictly (before load_strictly let a module's load hook drop keys,
    # it refused Swin V2's own checkpoint).
    e2e.run([sys.executable, 'tools/train.py', config, '--work-dir', work,
             '--no-validate', '--resume', osp.join(work, 'epoch_1.pth')])
    resumed = e2e.losses(work)
    assert [r['iter'] for r in resumed] == [3, 4]
    # the same steps again: the config leaves randomness.seed unset, and
    # the resumed sampler shuffles with the first run's seed
    assert [r['loss'] for r in resumed] == [r['loss'] for r in records[2:]]
    out = e2e.test(config, osp.join(work, 'epoch_2.pth'), work)
    assert 'accuracy/top1' in out
