"""UperNet on ADE20K from a TL-Align DeiT-S: the real config
``configs/upernet/upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_8xb2-160k_
ade20k-512x512.py`` with the data root, image scale (/8), iteration count
and a tiny ViT arch changed (tests/downstream/tiny.py), trained 2 iterations
through ``tools/train.py`` and tested through ``tools/test.py`` on a tiny
ADE20K in its real layout; the backbone a Runner builds from that config
holds the pretrained tensors (pos_embed resized from 2x2 to 4x4 patches by
the backbone's load hook)."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmpretrain.models.utils import resize_pos_embed

import tlalign_mm.downstream  # noqa: F401
from tests.downstream import e2e
from tests.downstream.datasets import write_ade20k
from tests.downstream.tiny import (
    TINY_VIT,
    config_path,
    dump,
    make_pretrain_checkpoint,
    shrink,
)

CONFIG = config_path(
    'upernet',
    'upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_8xb2-160k_ade20k-'
    '512x512.py')
PRETRAIN = config_path('tlalign', 'deit-small_4xb256-tlalign_in1k.py')


def tiny_upernet(cfg: Config, checkpoint: str) -> Config:
    width = TINY_VIT['embed_dims']
    cfg.model.backbone.arch = dict(TINY_VIT)
    cfg.model.backbone.out_indices = (0, 1, 2, 3)  # 4 blocks: all of them
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    cfg.model.neck.in_channels = [width] * 4
    cfg.model.neck.out_channels = width
    cfg.model.decode_head.in_channels = [width] * 4
    cfg.model.decode_head.channels = 32
    cfg.model.auxiliary_head.in_channels = width
    cfg.model.auxiliary_head.channels = 16
    cfg.train_cfg.max_iters = 2
    cfg.train_cfg.val_interval = 1000
    return cfg


@pytest.mark.e2e
def test_upernet_deit_small_from_tlalign_checkpoint(tmp_path):
    data = write_ade20k(str(tmp_path / 'ade'))
    pretrained = make_pretrain_checkpoint(PRETRAIN, str(tmp_path / 'pre.pth'),
                                          TINY_VIT, img_size=32)
    cfg = Config.fromfile(CONFIG)
    assert cfg.model.backbone.init_cfg._scope_ == 'tlalign_mm'
    cfg = tiny_upernet(
        shrink(cfg, data, factor=8, work_dir=str(tmp_path / 'work')),
        str(tmp_path / 'pre.pth'))
    assert cfg.model.backbone.img_size == 64
    config = dump(cfg, str(tmp_path / 'upernet_tiny.py'))

    n = sum(k.startswith('backbone.') for k in pretrained)
    work = str(tmp_path / 'work')
    out = e2e.train(config, work)
    assert f'Loaded {n} tensors into VisionTransformer' in out
    assert 'pos_embed (1, 5, 32)->(1, 17, 32)' in out
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2]
    assert all(r['loss'] == r['loss'] for r in records)
    out = e2e.test(config, osp.join(work, 'iter_2.pth'), work)
    assert 'mIoU' in out

    def expected(key, value):
        if key == 'pos_embed':
            return resize_pos_embed(value, (2, 2), (4, 4), 'bicubic', 1)
        return value

    backbone = e2e.built_backbone(cfg, str(tmp_path / 'inproc'))
    assert type(backbone).__name__ == 'VisionTransformer'
    assert e2e.assert_backbone_equals(backbone, pretrained, expected) == n
    assert not torch.equal(backbone.pos_embed[:, :5],
                           torch.zeros_like(backbone.pos_embed[:, :5]))
