"""How a module that makes tokens makes their labels: one rule per module
type. A token made from a window of positions (a patch embedding's conv,
patch merging's unfold, SPT's five shifted windows) gets the mean label of
the real positions its window reads (padding carries no mass).

Rules are looked up along the module's MRO by import path (subclasses are
covered; no optional library is imported to look). A new token-making
module: ``@register_token_rule('my_pkg.MyEmbed')`` on ``rule(module,
label_map)``, ``(B, S, H, W) -> (B, N, S)``.
"""
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn as nn

from tlalign_mm.core.token_labels import window_labels

from ..spt_lsa.spt import spt_token_labels

TokenRule = Callable[[nn.Module, torch.Tensor], torch.Tensor]
_RULES: Dict[str, TokenRule] = {}


def _qualname(cls: type) -> str:
    return f'{cls.__module__}.{cls.__qualname__}'


def register_token_rule(*class_paths: str):
    """Register ``rule(module, label_map) -> labels`` for the classes named
    (``'package.module.ClassName'``) and their subclasses."""

    def decorate(rule: TokenRule) -> TokenRule:
        for path in class_paths:
            _RULES[path] = rule
        return rule

    return decorate


def token_rule(module: nn.Module) -> Optional[TokenRule]:
    """The label rule of ``module``'s class or its nearest registered base;
    ``None`` if it has none."""
    for cls in type(module).__mro__:
        rule = _RULES.get(_qualname(cls))
        if rule is not None:
            return rule
    return None


def token_labels(module: nn.Module, label_map: torch.Tensor) -> torch.Tensor:
    """``(B, S, H, W)`` labels of ``module``'s input positions ->
    ``(B, N, S)`` labels of the tokens it makes, in their order."""
    rule = token_rule(module)
    if rule is None:
        known = ', '.join(sorted(_RULES))
        raise NotImplementedError(
            f'TL-Align has no label rule for the tokens of '
            f'{_qualname(type(module))}. Modules with a rule (and their '
            f'subclasses): {known}. Register one with '
            'tlalign_mm.models.recorders.token_rules.register_token_rule.')
    return rule(module, label_map)


def input_grid(args: tuple, kwargs: dict) -> Tuple[int, int]:
    """``(H, W)`` of a token-making module's input, from its call: an image
    or feature map ``(B, C, H, W)``, or a token map ``(B, H*W, C)`` with its
    ``input_size`` (mmcv ``PatchMerging``, SPT pooling)."""
    x = args[0] if args else kwargs['x']
    if x.dim() == 4:
        hw = x.shape[-2:]
    else:
        hw = args[1] if len(args) > 1 else kwargs['input_size']
    return int(hw[0]), int(hw[1])


def _adaptive_pre_pad(adaptive: Optional[nn.Module], hw) -> Optional[tuple]:
    """The ``(left, right, top, bottom)`` zero padding mmcv's (and mmdet's)
    ``AdaptivePadding`` applies to an ``hw`` map."""
    if adaptive is None:
        return None
    pad_h, pad_w = adaptive.get_pad_shape(hw)
    if adaptive.padding == 'corner':
        return (0, pad_w, 0, pad_h)
    return (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)


@register_token_rule('mmcv.cnn.bricks.transformer.PatchEmbed',
                     'mmdet.models.layers.transformer.utils.PatchEmbed')
def conv_embed_labels(embed: nn.Module,
                      label_map: torch.Tensor) -> torch.Tensor:
    """mmcv's and mmdet's ``PatchEmbed`` (a conv ``projection`` after
    optional adaptive padding, which mmcv names ``adaptive_padding`` and
    mmdet ``adap_padding``): the mean over each conv window's real
    positions. Overlapping windows (PVT v2) included."""
    adaptive = getattr(embed, 'adaptive_padding', None) or getattr(
        embed, 'adap_padding', None)
    return window_labels(embed.projection, label_map,
                         _adaptive_pre_pad(adaptive, label_map.shape[-2:]))


@register_token_rule('mmcv.cnn.bricks.transformer.PatchMerging',
                     'mmpretrain.models.utils.embed.PatchMerging')
def patch_merging_labels(merging: nn.Module,
                         label_map: torch.Tensor) -> torch.Tensor:
    """mmcv's ``PatchMerging`` (Swin) and mmpretrain's copy of it (Swin V2;
    not a subclass, and its ``use_post_norm`` only moves the norm after the
    reduction): a merged token's label is the mean label of the tokens its
    ``nn.Unfold`` window gathers (their sum, renormalised), the adaptive
    padding carrying no mass."""
    return window_labels(
        merging.sampler, label_map,
        _adaptive_pre_pad(merging.adaptive_padding, label_map.shape[-2:]))


register_token_rule(
    'tlalign_mm.models.spt_lsa.spt.ShiftedPatchTokenization')(
        spt_token_labels)
