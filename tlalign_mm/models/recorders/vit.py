"""Recording mmpretrain's ``VisionTransformer`` (ViT, DeiT), distilled
DeiT, ``DeiT3``, SL-ViT (LSA) and any backbone of ``MultiheadAttention``
blocks in ``backbone.layers``.

``MultiheadAttention.forward`` passes views of ``qkv = self.qkv(x)`` (an
``nn.Linear``) to its SDPA (mmpretrain 1.2.0, ``models/utils/
attention.py``): a forward hook on ``qkv`` records q and k, views of the
tensor the attention's backward saves, at SDPA's default scale; LSA's
learned per-head ``scale`` and diagonal mask (``diagonal_masking``) go in
as ``scale`` and ``bias``. The readout follows ``out_type``.
"""
from functools import partial
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.core import Attention

from ..spt_lsa.lsa import LocalitySelfAttention, diagonal_mask
from .base import Block, Recorder, check_head_reads_last_block


def _record_qkv(recording, attn, module, args, qkv) -> None:
    if recording.records is None:
        return
    B, N = qkv.shape[:2]
    q, k, _ = qkv.detach().reshape(B, N, 3, attn.num_heads,
                                   attn.head_dims).permute(2, 0, 3, 1, 4)
    scale = bias = None
    if isinstance(attn, LocalitySelfAttention):
        scale = attn.scale.detach()
        if attn.diagonal_masking and N > 1:
            bias = diagonal_mask(N, torch.float32, qkv.device)
    recording.add(Attention(q, k, scale, bias))


class ViTRecorder(Recorder):
    """Token-sequence ViTs with mmpretrain ``MultiheadAttention`` blocks in
    ``backbone.layers``. See the module docstring."""

    attention_types = ('mmpretrain.models.utils.attention.MultiheadAttention',
                       )
    #: Built from MultiheadAttention but not ``Y + Attn(Y)`` blocks.
    unsupported = {
        'RevVisionTransformer':
        'its reversible blocks add the attention of one half of the '
        'channels to the other half, which the label rule does not model',
    }

    def check(self, backbone: nn.Module) -> None:
        reason = self.unsupported.get(type(backbone).__name__)
        if reason is not None:
            raise NotImplementedError(
                f'TL-Align does not support {type(backbone).__name__}: '
                f'{reason}.')
        if not isinstance(getattr(backbone, 'layers', None), nn.Module):
            raise NotImplementedError(
                f'TL-Align records ViTs whose blocks are backbone.layers; '
                f'{type(backbone).__name__} has none.')
        blocks = self.blocks(backbone)
        check_head_reads_last_block(backbone, len(blocks))
        for i, block in enumerate(blocks):
            fn = block.attention.scaled_dot_product_attention
            if fn is not F.scaled_dot_product_attention:
                raise NotImplementedError(
                    f'Block {i} attends with {fn} (mmpretrain uses it for '
                    'qk_scale); TL-Align records the attention of torch\'s '
                    'scaled_dot_product_attention on q and k from qkv. Leave '
                    'qk_scale unset.')

    def blocks(self, backbone: nn.Module) -> List[Block]:
        blocks = []
        for i, layer in enumerate(backbone.layers):
            attns = [m for m in layer.modules() if self.is_attention(m)]
            if len(attns) != 1 or not isinstance(
                    getattr(attns[0], 'qkv', None), nn.Linear):
                raise NotImplementedError(
                    f'TL-Align records ViT blocks with one mmpretrain '
                    f'MultiheadAttention and its qkv projection; block {i} '
                    f'({type(layer).__name__}) has {len(attns)}.')
            attn = attns[0]
            blocks.append(Block(layer, attn, getattr(attn, 'out_drop', None)))
        return blocks

    def record_attention(self, block: Block, recording) -> list:
        attn = block.attention
        return [attn.qkv.register_forward_hook(
            partial(_record_qkv, recording, attn))]

    def num_extra_tokens(self, backbone: nn.Module) -> int:
        return getattr(backbone, 'num_extra_tokens', 0)

    def readout(self, backbone: nn.Module,
                tokens: torch.Tensor) -> torch.Tensor:
        out_type = getattr(backbone, 'out_type', None)
        if out_type == 'cls_token':
            return tokens[:, 0]
        if out_type == 'avg_featmap':
            return tokens[:, self.num_extra_tokens(backbone):].mean(1)
        raise ValueError(
            f'TL-Align needs the label of what the head classifies, but the '
            f"backbone's out_type={out_type!r} gives token maps. Use "
            "out_type='cls_token' or 'avg_featmap'.")
