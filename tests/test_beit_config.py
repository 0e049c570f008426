"""The BEiT-B TL-Align twin builds and records mmpretrain's BEiT (its
CutMix twin is mmpretrain's recipe: tests/test_configs.py)."""
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401
from tlalign_mm.models.recorders import BEiTRecorder, get_recorder

from .config_snapshot import load


def test_tlalign_twin_builds_and_records_a_tiny_beit():
    cfg = load('configs/tlalign/beit-base-p16_8xb128-coslr-100e-tlalign_'
               'in1k.py').model
    cfg.backbone.update(arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                                  feedforward_channels=64), img_size=32)
    cfg.head.in_channels = 32
    model = MODELS.build(cfg)
    assert type(model.backbone).__name__ == 'BEiTViT'
    assert type(get_recorder(model.backbone)) is BEiTRecorder
    assert model.data_preprocessor.batch_augments is not None
