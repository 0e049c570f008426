"""End to end: the real config ``configs/tlalign/deit-small-timm_4xb256-
tlalign_in1k.py`` (TL-Align on timm's DeiT-S through
``PooledTIMMBackbone``) trained through ``tools/train.py`` and tested
through ``tools/test.py`` on a tiny ImageNet in its real layout
(``train/``, ``val/`` class folders and ``meta/{train,val}.txt``), then
exported with ``tools/export_backbone.py --format timm`` and loaded strictly
into ``timm.create_model``, whose logits are the trained classifier's.

Changed for CPU time, as in the downstream e2e tests
(``tests/downstream/tiny.py``): the data root, the image scale (/7: 224 ->
32, so ``img_size=32``), a tiny timm arch of the same model
(``patch_size=8, embed_dim=32, depth=2, num_heads=2``; the head's
``in_channels`` follows), no workers, and the schedule: 2 epochs of 2
iterations (batch 3), the warm-up in the first and the cosine decay in the
second (the recipe's are 20 and 280 epochs).
"""
import os
import os.path as osp

import numpy as np
import pytest
import timm
import torch
from mmengine.config import Config
from PIL import Image

import tlalign_mm  # noqa: F401  (registers; allow-lists checkpoints)
from tests.downstream import e2e
from tests.downstream.tiny import config_path, dump, shrink
from tests.tool_scripts import export_cli

CONFIG = config_path('tlalign', 'deit-small-timm_4xb256-tlalign_in1k.py')
TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)


def write_imagenet(root, num_classes=3, per_class=dict(train=2, val=1)):
    """mmpretrain's ImageNet layout: ``{split}/<wnid>/<name>.JPEG`` and
    ``meta/{split}.txt`` lines ``<wnid>/<name>.JPEG <label>``."""
    rng = np.random.default_rng(0)
    os.makedirs(osp.join(root, 'meta'))
    for split, count in per_class.items():
        lines = []
        for label in range(num_classes):
            wnid = f'n0000000{label}'
            os.makedirs(osp.join(root, split, wnid))
            for i in range(count):
                name = f'{wnid}/{split}_{i}.JPEG'
                img = rng.integers(0, 80, (40, 48, 3)) + 80 * label
                Image.fromarray(img.astype(np.uint8)).save(
                    osp.join(root, split, name), format='JPEG')
                lines.append(f'{name} {label}\n')
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.writelines(lines)
    return root


def two_short_epochs(cfg: Config):
    """The schedule of these tests: 2 epochs of 2 iterations (batch 3 of
    :func:`write_imagenet`'s 6 images), the recipe's 20 warm-up epochs in
    the first and its cosine from the second; returns the cosine."""
    cfg.train_dataloader.batch_size = 3
    cfg.train_cfg.max_epochs = 2
    warmup, cosine = cfg.param_scheduler
    assert (warmup.type, warmup.end) == ('LinearLR', 20)
    assert (cosine.type, cosine.begin) == ('CosineAnnealingLR', 20)
    warmup.end = cosine.begin = 1
    return cosine


@pytest.mark.e2e
def test_timm_deit_small_tlalign_trains_tests_and_exports(tmp_path, capsys):
    data = write_imagenet(str(tmp_path / 'imagenet'))
    work = str(tmp_path / 'work')
    cfg = shrink(Config.fromfile(CONFIG), data, factor=7, work_dir=work)
    assert cfg.model.type == 'TLAlignClassifier'
    assert cfg.model.backbone.type == 'PooledTIMMBackbone'
    cfg.model.backbone.update(TINY)
    cfg.model.head.in_channels = TINY['embed_dim']
    two_short_epochs(cfg)
    config = dump(cfg, str(tmp_path / 'timm_tiny.py'))

    out = e2e.train(config, work)
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2, 3, 4]
    assert all(r['loss'] == r['loss'] for r in records)  # not NaN
    ckpt = osp.join(work, 'epoch_2.pth')
    out = e2e.test(config, ckpt, work)
    assert 'accuracy/top1' in out

    exported = str(tmp_path / 'deit_small_timm.pth')
    out = export_cli([ckpt, exported, '--format', 'timm'], capsys)
    assert 'loads it with strict=True' in out
    model = timm.create_model('deit_small_patch16_224', pretrained=False,
                              num_classes=1000, global_pool='token', **TINY)
    model.load_state_dict(torch.load(exported, weights_only=True),
                          strict=True)
    model.eval()

    from mmpretrain.registry import MODELS
    classifier = MODELS.build(cfg.model)
    state = torch.load(ckpt, weights_only=True)['state_dict']
    classifier.load_state_dict(state, strict=True)
    classifier.eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(images),
                                   classifier(images, mode='tensor'),
                                   atol=1e-5, rtol=1e-5)
