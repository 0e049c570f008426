"""TinyViT (mmpretrain 1.2.0, ``models/backbones/tinyvit.py``).

Its stem is two 3x3 stride-2 convs (``PatchEmbed``: tokens of 4 px, each
the mean of the means under the two convs' windows, in order); its first
stage is MBConv blocks, ``act(x + drop_path(f(x)))`` with ``f`` a 1x1, 3x3
depth-wise, 1x1 conv stack (a residual branch: ``W Y`` of the 3x3
windows); then attention stages of ``TinyViTBlock``: ``LeAttention`` (its
own LayerNorm, q/k/v split per head, an attention bias, inline softmax)
over windows of the zero-padded map, no mask (the ``Windows`` key map:
padded keys carry no label, their mass renormalised as Swin's;
docs/design.md), a ``local_conv`` on the trunk (a token step: 3x3 window
means) and the MLP. Each stage but the last ends in a ``PatchMerging``
(1x1, 3x3 stride-2 depth-wise, 1x1: a token step of the 3x3 windows,
tapped on its ``conv2``, whose input is always the ``(B, C, H, W)`` map).
"""
import math

import torch.nn as nn

from tlalign_mm.core import Windows
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import conv_branch_labels, is_a, window_convs
from . import Description, Tap, last_output_block, not_described

_TINYVIT = 'mmpretrain.models.backbones.tinyvit.'

# Each is the mean under its convolutions' windows, in order (1x1 convs,
# BatchNorm and GELU are token-wise): the stem, an MBConv branch (W Y), a
# ConvBN2d (the local conv, a merge's stride-2 conv).
TOKEN_RULES.register_module(
    [_TINYVIT + 'PatchEmbed', _TINYVIT + 'MBConvBlock', _TINYVIT + 'ConvBN2d'],
    module=conv_branch_labels)


@FAMILIES.register_module(_TINYVIT + 'TinyViT')
def describe_tinyvit(backbone: nn.Module) -> Description:
    """A slot per ``TinyViTBlock``; the MBConv blocks (no attention of
    their own) and the first merge run in the first one's slot, before its
    attention. The head reads the mean token of the last output stage
    (after its merge, if it has one)."""
    blocks, taps, ends = [], [], []
    for stage in backbone.stages:
        for block in stage.blocks:
            i = len(blocks)
            if is_a(block, _TINYVIT + 'MBConvBlock'):
                taps += [Tap(i, block, 'branch'),
                         Tap(i, block.drop_path, 'branch_keep')]
                continue
            attn, ws, (H, W) = block.attn, block.window_size, block.img_size
            if not is_a(attn, 'mmpretrain.models.utils.attention.LeAttention'):
                raise not_described(backbone, 'TinyViT', f'block {i} has '
                                    f'{type(attn).__name__}, not LeAttention')
            windows = Windows((H, W), ws, 0, ((ws - H % ws) % ws,
                                              (ws - W % ws) % ws))
            taps += [Tap(i, attn.qkv, 'split_qkv_bias', (attn, 'qkv')),
                     Tap(i, attn, 'fixed_key_map', windows),
                     Tap(i, block.drop_path, 'keep'),
                     Tap(i, block.local_conv, 'step')]
            blocks.append(block)
        ends.append(len(blocks) - 1)
        if stage.downsample is not None:
            taps += [Tap(len(blocks), stage.downsample.conv2, 'step')]
    last = last_output_block(ends, backbone.out_indices)
    through = backbone.stages[max(backbone.out_indices)].downsample is not None
    stem = window_convs(backbone.patch_embed)
    return Description(blocks, taps, backbone.patch_embed, 0, (last, through),
                       token_size=tuple(math.prod(c.stride[d] for c in stem)
                                        for d in (0, 1)))
