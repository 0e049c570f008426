import os.path as osp

import torch
from mmengine.config import Config
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401


def test_pools_a_list_like_a_tuple():
    gap = MODELS.build(dict(type='PyramidGlobalAveragePooling'))
    maps = [torch.randn(2, 4, 5, 5), torch.randn(2, 8, 3, 3)]
    ours = gap(maps)
    assert isinstance(ours, tuple)
    for a, b in zip(ours, (m.mean((2, 3)) for m in maps)):
        torch.testing.assert_close(a, b)


def test_pvt_classifier_config_runs():
    root = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    cfg = Config.fromfile(
        osp.join(root, 'configs/tlalign/pvt-tiny_8xb128-tlalign_in1k.py'))
    model = MODELS.build(cfg.model)
    model.eval()
    with torch.no_grad():
        scores = model(torch.randn(1, 3, 64, 64))
    assert scores.shape == (1, 1000)
