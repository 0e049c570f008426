"""MViTv2 (mmpretrain ``MViT``): pooling attention, its queries pooled
(docs/design.md, "Pooled and subset queries")."""
import torch.nn as nn

from tlalign_mm.registry import FAMILIES

from ..token_rules import is_a
from . import (
    Description,
    Tap,
    embed_stride,
    last_output_block,
    not_described,
    part,
)

_MVIT = 'mmpretrain.models.backbones.mvit.'


@FAMILIES.register_module(_MVIT + 'MViT')
def describe_mvit(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0's ``MViT`` (``backbones/mvit.py``): each
    ``MultiScaleBlock``'s ``MultiScaleAttention`` pools q, k, v by
    depth-wise convs (``pool_q``/``pool_k``/``pool_v``, then ``norm_q``/
    ``norm_k``/``norm_v``) and attends with an inline softmax over ``(q s)
    k^T`` plus a decomposed relative position bias; ``residual_pooling``
    adds the pooled q to its output; a downscaling block max-pools its skip
    (``pool_skip``). The one ``drop_path`` runs on the attention branch
    first. Stage ``s`` ends before block ``downscale_indices[s]``; the head
    reads the mean token of the last ``out_scales`` stage. Patch tokens
    only."""
    blocks, taps = list(part(backbone, 'blocks', 'MViT')), []
    for i, block in enumerate(blocks):
        msa = getattr(block, 'attn', None)
        if not is_a(msa, _MVIT + 'MultiScaleAttention') or not all(
                isinstance(getattr(msa, n, None), nn.LayerNorm)
                for n in ('norm_q', 'norm_k')):
            raise not_described(backbone, 'MViT', f'block {i} has no '
                                'MultiScaleAttention with LayerNorm norm_q, '
                                'norm_k')
        taps += [Tap(i, msa.norm_q, 'q_norm', msa), Tap(i, msa.norm_k,
                                                        'k_norm'),
                 Tap(i, msa, 'pooling', block),
                 Tap(i, block.drop_path, 'keep')]
    ends = [j - 1 for j in backbone.downscale_indices] + [len(blocks) - 1]
    embed = part(backbone, 'patch_embed', 'MViT')
    return Description(blocks, taps, embed, 0,
                       (last_output_block(ends, backbone.out_scales), False),
                       (0, None), embed_stride(embed))
