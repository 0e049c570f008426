"""Twins, PCPVT and SVT (mmpretrain 1.2.0, ``models/backbones/twins.py``).

Stage ``s`` embeds with ``patch_embeds[s]`` (mmcv ``PatchEmbed``, corner
padding), then runs its blocks; after a stage's first block its
conditional position encoding (PEG, ``x + dwconv3x3(x)``) runs. A block
attends by ``GlobalSubsampledAttention`` (q and kv from separate Linears,
SDPA, keys reduced by its ``sr`` conv: the ``Reduction`` key map) or, every
other SVT block, ``LocallyGroupedSelfAttention`` (window attention, its
softmax given to ``attn_drop``, padded keys: the ``Windows`` key map). The
head reads the mean token of the last output stage.
"""
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import conv_branch_labels, is_a
from . import Description, Tap, embed_stride, last_output_block, not_described

_TWINS = 'mmpretrain.models.backbones.twins.'

# The PEG is a residual branch of one 3x3 depth-wise conv: W Y (its stride
# is 1, which the description checks).
TOKEN_RULES.register_module(
    'mmpretrain.models.utils.position_encoding.ConditionalPositionEncoding',
    module=conv_branch_labels)


@FAMILIES.register_module(_TWINS + 'PCPVT')  # (SVT is a PCPVT)
def describe_twins(backbone: nn.Module) -> Description:
    """Twins' blocks, stage by stage. A GSA block calls two drop-paths in
    series on its attention branch (the attention's ``out_drop``, then the
    block's ``drop_path``, also run on its FFN): the block's, when it has
    one, is zero whenever either dropped; an LSA block has only the
    block's."""
    blocks, taps, ends = [], [], []
    for s, (embed, stage, peg) in enumerate(zip(
            backbone.patch_embeds, backbone.stages,
            backbone.position_encodings)):
        taps += [Tap(len(blocks), embed, 'step')] if s else []
        for j, layer in enumerate(stage):
            attn, i = layer.attn, len(blocks)
            if is_a(attn, _TWINS + 'GlobalSubsampledAttention') and \
                    attn.scaled_dot_product_attention is \
                    F.scaled_dot_product_attention:
                taps += [Tap(i, attn.q, 'q_linear', attn),
                         Tap(i, attn.kv, 'kv_linear', attn),
                         Tap(i, attn, 'reduction')]
            elif is_a(attn, _TWINS + 'LocallyGroupedSelfAttention'):
                taps += [Tap(i, attn.attn_drop, 'attn_drop_input'),
                         Tap(i, attn, 'local_windows')]
            else:
                raise not_described(backbone, 'Twins', f'block {i} has '
                                    f'{type(attn).__name__}, not GSA with '
                                    "torch's SDPA (no qk_scale) or LSA")
            keep = getattr(attn, 'out_drop', None) if isinstance(
                layer.drop_path, nn.Identity) else layer.drop_path
            taps += [Tap(i, keep, 'keep')]
            if j == 0 and peg.stride != 1:
                raise not_described(backbone, 'Twins', 'a strided PEG')
            taps += [Tap(i, peg, 'branch')] if j == 0 else []
            blocks.append(layer)
        ends.append(len(blocks) - 1)
    embed = backbone.patch_embeds[0]
    return Description(blocks, taps, embed, 0,
                       (last_output_block(ends, backbone.out_indices), False),
                       token_size=embed_stride(embed))
