"""LeViT: attention with attention biases, subsampling attention whose
queries are a strided selection (docs/design.md, "Pooled and subset
queries"), a four-convolution stem."""
import math

import torch.nn as nn

from tlalign_mm.core import Pool, PooledQueries
from tlalign_mm.registry import FAMILIES, TOKEN_RULES

from ..token_rules import conv_branch_labels, is_a, window_convs
from . import Description, Tap, last_output_block, not_described, part

_LEVIT = 'mmpretrain.models.backbones.levit.'

# The stem: four 3x3 stride-2 convs (BN and Hardswish between, token-wise):
# each token the mean of each conv's window in turn (rule 2, composed).
TOKEN_RULES.register_module(_LEVIT + 'HybridBackbone',
                            module=conv_branch_labels)


@FAMILIES.register_module(_LEVIT + 'LeViT')
def describe_levit(backbone: nn.Module) -> Description:
    """mmpretrain 1.2.0's ``LeViT`` (``backbones/levit.py``): each stage a
    ``Sequential`` of ``Residual(Attention)`` and ``Residual(MLP)`` blocks,
    later stages led by an ``AttentionSubsample`` (queries ``q`` of a
    stride selection, keys and values ``kv`` of every token, no residual);
    both add attention biases before an inline softmax, and ``Residual``
    holds the drop-path. The head reads the mean token of the last
    ``out_indices`` stage."""
    blocks, taps, ends = [], [], []
    for stage in part(backbone, 'stages', 'LeViT'):
        for module in stage:
            attn, i = getattr(module, 'block', module), len(blocks)
            if is_a(module, _LEVIT + 'AttentionSubsample'):
                res, s = module.resolution, module.stride
                taps += [Tap(i, module.kv, 'split_qkv_bias', (module, 'kv')),
                         Tap(i, module.q, 'split_qkv_bias', (module, 'q')),
                         Tap(i, module, 'fixed_key_map', PooledQueries(
                             (res, res), Pool((1, 1), (s, s)), False))]
            elif is_a(attn, _LEVIT + 'Attention'):
                taps += [Tap(i, attn.qkv, 'split_qkv_bias', (attn, 'qkv')),
                         Tap(i, module.drop_path, 'keep')]
            elif not is_a(attn, _LEVIT + 'MLP'):
                raise not_described(backbone, 'LeViT', 'a stage holds a '
                                    f'{type(attn).__name__}')
            else:
                continue
            blocks.append(module)
        ends.append(len(blocks) - 1)
    embed = part(backbone, 'patch_embed', 'LeViT')
    side = math.prod(conv.stride[0] for conv in window_convs(embed))
    return Description(blocks, taps, embed, 0,
                       (last_output_block(ends, backbone.out_indices), False),
                       (0, None), (side, side))
