"""An initialiser for parameters that are no layer's weight (mmengine's set
layers' ``weight`` and ``bias``; mmpretrain leaves a ViT's ``cls_token`` at
zero)."""
from typing import Sequence

import torch
from mmengine.model.weight_init import trunc_normal_
from mmengine.registry import WEIGHT_INITIALIZERS
from torch import nn


@WEIGHT_INITIALIZERS.register_module(name='TruncNormalParams')
class TruncNormalParams:
    """Truncated normal for the named parameters of the module it is given
    (``init_cfg=[dict(type='TruncNormalParams', names=['cls_token'],
    std=.02)]`` on a backbone).

    Args:
        names (Sequence[str]): parameter names, as ``named_parameters``
            gives them relative to the module.
        std (float): standard deviation. Defaults to 0.02.
        a, b (float): the cut-offs (absolute, as timm's and mmengine's
            ``trunc_normal_``). Default to -2 and 2.
    """

    def __init__(self, names: Sequence[str], std: float = .02,
                 a: float = -2., b: float = 2.):
        if isinstance(names, str) or not names:
            raise ValueError(
                'TruncNormalParams: names must be a non-empty list of '
                f'parameter names, got {names!r}.')
        self.names = list(names)
        self.std, self.a, self.b = std, a, b

    def __call__(self, module: nn.Module) -> None:
        params = dict(module.named_parameters())
        missing = [n for n in self.names if n not in params]
        if missing:
            raise KeyError(
                f'TruncNormalParams: {type(module).__name__} has no '
                f'parameter {missing}; it has e.g. {sorted(params)[:5]}.')
        with torch.no_grad():
            for name in self.names:
                trunc_normal_(params[name], std=self.std, a=self.a, b=self.b)

    def _get_init_info(self):
        return f'{type(self).__name__}: std={self.std}, names={self.names}'
