"""TruncNormalParams, built from its config dict by mmengine's initialize."""
import math

import pytest
import torch
from mmengine.model.weight_init import initialize

import tlalign_mm  # noqa: F401


class Tokens(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.cls_token = torch.nn.Parameter(torch.zeros(1, 1, 4096))
        self.other = torch.nn.Parameter(torch.zeros(8))


def test_sets_only_the_named_parameters_with_absolute_cut_offs():
    module = Tokens()
    torch.manual_seed(0)
    initialize(module, dict(type='TruncNormalParams', names=['cls_token'],
                            std=.02))
    w = module.cls_token.detach()
    assert abs(w.std().item() - 0.02) < 5 * 0.02 / math.sqrt(2 * w.numel())
    assert not module.other.any()
    # cut at +-0.5 itself, not at 0.5 std (which would reach 1)
    initialize(module, dict(type='TruncNormalParams', names=['cls_token'],
                            std=2., a=-.5, b=.5))
    assert module.cls_token.abs().max() <= .5


def test_bad_names_are_named():
    with pytest.raises(KeyError, match='no parameter'):
        initialize(Tokens(), dict(type='TruncNormalParams', names=['pos']))
    with pytest.raises(ValueError, match='non-empty list'):
        initialize(Tokens(), dict(type='TruncNormalParams',
                                  names='cls_token'))
