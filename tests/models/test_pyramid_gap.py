import torch
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401


def test_pools_a_list_like_a_tuple():
    gap = MODELS.build(dict(type='PyramidGlobalAveragePooling'))
    maps = [torch.randn(2, 4, 5, 5), torch.randn(2, 8, 3, 3)]
    ours = gap(maps)
    assert isinstance(ours, tuple)
    for a, b in zip(ours, (m.mean((2, 3)) for m in maps)):
        torch.testing.assert_close(a, b)
