"""DaViT (mmpretrain 1.2.0, ``models/backbones/davit.py``).

A ``DaViTBlock`` is a spatial block then a channel block, each ``x +
cpe1(x)``, attention, ``x + cpe2(x)``, FFN, where a ``ConvPosEnc`` is a
residual 3x3 depth-wise conv (a ``branch``: ``W Y``). The spatial block's
attention is a ``ShiftWindowMSA`` of ``DaViTWindowMSA`` (its softmax
through ``w_msa.softmax``, the ``Windows`` key map, its ``drop`` the
drop-path); the channel block's attention mixes each token's own channels
(docs/design.md, "Between attention blocks", rule 1): no tap. A
``DaViTDownSample`` after a stage merges 2x2 tokens.
"""
import torch.nn as nn

from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import conv_branch_labels, is_a
from . import Description, Tap, embed_stride, last_output_block, not_described

_DAVIT = 'mmpretrain.models.backbones.davit.'

# ConvPosEnc: W Y of its 3x3 depth-wise conv. DaViTDownSample: the mean
# under its projection's 2x2 windows; its AdaptivePadding is applied to the
# (B, L, C) tokens, so it pads nothing on any map mmpretrain's own
# `L == H * W` assertion lets through.
TOKEN_RULES.register_module(
    [_DAVIT + 'ConvPosEnc', _DAVIT + 'DaViTDownSample'],
    module=conv_branch_labels)


@FAMILIES.register_module(_DAVIT + 'DaViT')
def describe_davit(backbone: nn.Module) -> Description:
    """A slot per ``DaViTBlock``: the spatial ``cpe1`` before its window
    attention, the spatial ``cpe2`` and both channel-block CPEs after it
    (none has a drop-path); the head reads ``norm{i}`` of the last output
    stage."""
    blocks, taps, ends = [], [], []
    for stage in backbone.stages:
        for block in stage.blocks:
            spatial, channel, i = block.spatial_block, block.channel_block, \
                len(blocks)
            msa = spatial.attn
            if not is_a(msa, 'mmpretrain.models.utils.attention.'
                        'ShiftWindowMSA') or not isinstance(
                            getattr(msa.w_msa, 'softmax', None), nn.Softmax):
                raise not_described(backbone, 'DaViT', f'block {i} has no '
                                    'ShiftWindowMSA with an nn.Softmax')
            taps += [Tap(i, spatial.cpe1, 'branch'),
                     Tap(i, msa.w_msa.softmax, 'softmax'),
                     Tap(i, msa, 'windows'), Tap(i, msa.drop, 'keep')]
            taps += [Tap(i, cpe, 'branch')
                     for cpe in (spatial.cpe2, channel.cpe1, channel.cpe2)]
            blocks.append(block)
        ends.append(len(blocks) - 1)
        if stage.downsample is not None:
            taps += [Tap(len(blocks), stage.downsample, 'step')]
    # (with out_after_downsample, mmpretrain 1.2.0 normalises a stage's
    # downsampled output at its width before the downsample, and fails, on
    # every stage but the last, which has no downsample)
    return Description(blocks, taps, backbone.patch_embed, 0, (
        last_output_block(ends, backbone.out_indices), False),
        token_size=embed_stride(backbone.patch_embed))
