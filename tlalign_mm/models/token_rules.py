"""How a module that makes tokens makes their labels: one rule per module
type, registered in :data:`TOKEN_RULES` (``tlalign_mm.registry``) by
decorator, ``rule(module, label_map)``, ``(B, S, H, W) -> (B, N, S)``. A
token made from a window of positions (a conv, patch merging's unfold,
SPT's five shifted windows) gets the mean label of the real positions it
reads (padding carries no mass). Modules are looked up by import path
along their class's MRO (subclasses covered, no optional library
imported), as :mod:`.families` looks up backbones and attention modules.
"""
from typing import Callable, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from mmengine.registry import Registry

from tlalign_mm.core import flatten_label_map, window_labels, window_mean
from tlalign_mm.registry import TOKEN_RULES

TokenRule = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def class_paths(obj):
    """``'package.module.Class'`` of ``obj``'s class and its bases."""
    return [f'{c.__module__}.{c.__qualname__}' for c in type(obj).__mro__]


def lookup(table: Union[Registry, Mapping[str, object]],
           obj) -> Optional[object]:
    """The entry of ``obj``'s class or of its nearest base in ``table`` (a
    registry keyed by class path, or a dict)."""
    table = getattr(table, 'module_dict', table)
    return next((table[p] for p in class_paths(obj) if p in table), None)


def is_a(obj, *paths: str) -> bool:
    """``isinstance`` by import path (imports nothing)."""
    return any(p in paths for p in class_paths(obj))


def _adaptive_pre_pad(adaptive: Optional[nn.Module], hw) -> Optional[tuple]:
    """The ``(left, right, top, bottom)`` zero padding mmcv's (and mmdet's)
    ``AdaptivePadding`` applies to an ``hw`` map."""
    if adaptive is None:
        return None
    pad_h, pad_w = adaptive.get_pad_shape(hw)
    if adaptive.padding == 'corner':
        return (0, pad_w, 0, pad_h)
    return (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)


@TOKEN_RULES.register_module([
    'mmcv.cnn.bricks.transformer.PatchEmbed',
    'mmdet.models.layers.transformer.utils.PatchEmbed'])
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


@TOKEN_RULES.register_module([
    'mmcv.cnn.bricks.transformer.PatchMerging',
    'mmpretrain.models.utils.embed.PatchMerging'])
def patch_merging_labels(merging: nn.Module,
                         label_map: torch.Tensor) -> torch.Tensor:
    """mmcv's ``PatchMerging`` (Swin) and mmpretrain's copy of it (Swin V2;
    not a subclass, and its ``use_post_norm`` only moves the norm after the
    reduction): a merged token's label is the mean label of the tokens its
    ``nn.Unfold`` window gathers, the adaptive padding carrying no mass."""
    return window_labels(
        merging.sampler, label_map,
        _adaptive_pre_pad(merging.adaptive_padding, label_map.shape[-2:]))


@TOKEN_RULES.register_module('timm.layers.patch_embed.PatchEmbed')
def timm_patch_embed_labels(embed: nn.Module,
                            label_map: torch.Tensor) -> torch.Tensor:
    """timm's ``PatchEmbed``: the mean over real positions under each
    window of ``proj``, after ``dynamic_img_pad``'s bottom/right padding
    (mirrored from ``PatchEmbed.forward``, timm 1.0.31)."""
    pre_pad = None
    if embed.dynamic_img_pad:
        H, W = label_map.shape[-2:]
        ph, pw = embed.patch_size
        pre_pad = (0, (pw - W % pw) % pw, 0, (ph - H % ph) % ph)
    return window_labels(embed.proj, label_map, pre_pad)


def window_convs(module: nn.Module) -> list:
    """The convolutions in ``module`` that mix tokens (a window of more than
    one position, or a stride), in module order; a 1x1 conv is token-wise,
    like a Linear."""
    return [m for m in module.modules() if isinstance(m, nn.Conv2d) and (
        tuple(m.kernel_size) != (1, 1) or tuple(m.stride) != (1, 1))]


@TOKEN_RULES.register_module('mmdet.models.backbones.pvt.MixFFN')
def conv_branch_labels(branch: nn.Module,
                       label_map: torch.Tensor) -> torch.Tensor:
    """A residual branch that mixes tokens by convolutions (PVT v2's
    ``MixFFN``: 1x1, 3x3 depth-wise, 1x1): ``W Y``, the mean label under
    each of :func:`window_convs`' windows, in order (docs/design.md,
    "Between attention blocks"); core adds the identity's."""
    for conv in window_convs(branch):
        label_map = window_mean(label_map, conv.kernel_size, conv.stride,
                                conv.padding, conv.dilation)
    return flatten_label_map(label_map)


def token_rule(module: nn.Module) -> TokenRule:
    """The label rule of ``module``'s class or its nearest listed base; a
    clear error if it has none."""
    rule = lookup(TOKEN_RULES, module)
    if rule is None:
        raise NotImplementedError(
            f'TL-Align has no label rule for the tokens of '
            f'{class_paths(module)[0]}: register one, @TOKEN_RULES.register_'
            "module('<its class path>') (tlalign_mm.registry; registered: "
            f'{", ".join(TOKEN_RULES.module_dict)}).')
    return rule


def input_grid(args: tuple, kwargs: dict) -> Tuple[int, int]:
    """``(H, W)`` of a token-making module's input, from its call: an image
    or feature map ``(B, C, H, W)``, or a token map ``(B, H*W, C)`` with its
    ``input_size`` (mmcv ``PatchMerging``, SPT pooling) or its ``H, W``
    (XCiT's ``LPI``)."""
    x = args[0] if args else kwargs['x']
    if x.dim() == 4:
        hw = x.shape[-2:]
    elif len(args) > 2:
        hw = args[1:3]
    else:
        hw = args[1] if len(args) > 1 else kwargs['input_size']
    return int(hw[0]), int(hw[1])
