"""End to end: the real config ``configs/tlalign/beit-base-p16_8xb128-
coslr-100e-tlalign_in1k.py`` (TL-Align on mmpretrain's BEiT-B fine-tune)
trained through ``tools/train.py`` from a BEiT pretraining checkpoint and
tested through ``tools/test.py``, on a tiny ImageNet in its real layout.

The checkpoint is made here, as BEiT pretraining leaves it: backbone keys
under ``backbone.``, one shared relative position table
(``use_shared_rel_pos_bias``), which the fine-tune's ``BEiTViT`` load hook
copies into every block; it reaches the config through ``BEIT_PRE_CKPT``,
the variable a user sets.

Changed for CPU time, as in ``test_timm_e2e.py``: the data root, the image
scale (/7: 224 -> 32, so ``img_size=32``; patch 8), a tiny arch (2 blocks of
32 channels; the head's ``in_channels`` follows), no workers, and the
schedule: 2 epochs of 2 iterations (batch 3), the warm-up in the first and
the cosine decay in the second (the recipe's are 20 and 80 epochs).
"""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401  (registers; allow-lists checkpoints)
from tests.downstream import e2e
from tests.downstream.tiny import config_path, dump, shrink

from .test_timm_e2e import two_short_epochs, write_imagenet

CONFIG = config_path('tlalign',
                     'beit-base-p16_8xb128-coslr-100e-tlalign_in1k.py')
ARCH = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def write_pretrain_checkpoint(path):
    """A tiny BEiT-pretraining backbone (shared relative position bias),
    saved as mmpretrain's ``BEiT`` algorithm saves it; returns its shared
    table."""
    torch.manual_seed(0)
    backbone = MODELS.build(dict(
        type='BEiTViT', arch=ARCH, img_size=32, patch_size=8,
        use_rel_pos_bias=False, use_shared_rel_pos_bias=True))
    state = {f'backbone.{k}': v.clone() for k, v in
             backbone.state_dict().items()}
    table = torch.randn_like(
        state['backbone.rel_pos_bias.relative_position_bias_table'])
    state['backbone.rel_pos_bias.relative_position_bias_table'] = table
    torch.save(dict(state_dict=state), path)
    return state, table


@pytest.mark.e2e
def test_beit_tlalign_fine_tune_trains_and_tests(tmp_path, monkeypatch):
    data = write_imagenet(str(tmp_path / 'imagenet'))
    work = str(tmp_path / 'work')
    ckpt = str(tmp_path / 'beit_pretrain.pth')
    pretrained, table = write_pretrain_checkpoint(ckpt)
    monkeypatch.setenv('BEIT_PRE_CKPT', ckpt)
    cfg = shrink(Config.fromfile(CONFIG), data, factor=7, work_dir=work)
    assert cfg.model.type == 'TLAlignClassifier'
    assert cfg.model.backbone.type == 'BEiTViT'
    assert cfg.model.backbone.init_cfg.checkpoint == ckpt
    assert cfg.model.backbone.img_size == 32
    cfg.model.backbone.update(arch=ARCH, patch_size=8)
    cfg.model.head.in_channels = ARCH['embed_dims']
    cosine = two_short_epochs(cfg)
    assert cosine.end == 100
    cosine.end = 2
    config = dump(cfg, str(tmp_path / 'beit_tiny.py'))

    # The Runner's backbone holds the pretrained tensors, the shared table
    # copied into every block.
    backbone = e2e.built_backbone(Config.fromfile(config),
                                  str(tmp_path / 'init'))
    state = backbone.state_dict()
    for i in range(ARCH['num_layers']):
        assert torch.equal(
            state[f'layers.{i}.attn.relative_position_bias_table'], table)
    for key, value in pretrained.items():
        name = key[len('backbone.'):]
        if name in state and 'relative_position' not in name:
            assert torch.equal(state[name], value), name

    e2e.train(config, work)
    records = e2e.losses(work)
    assert [r['iter'] for r in records] == [1, 2, 3, 4]
    assert all(r['loss'] == r['loss'] for r in records)  # not NaN
    # The target is TL-Align's: on some CutMix batch it left the area one.
    assert max(r['label_drift/abs_diff'] for r in records) > 0
    out = e2e.test(config, osp.join(work, 'epoch_2.pth'), work)
    assert 'accuracy/top1' in out
