"""Recording mmpretrain's ``BEiTViT`` (BEiT, BEiT v2 fine-tunes).

mmpretrain 1.2.0, ``models/utils/attention.py: BEiTAttention.forward``
builds q, k from ``F.linear`` with ``q_bias``/``v_bias`` (so no ``qkv``
hook fires), adds its own relative position bias or the backbone's shared
``rel_pos_bias``, and calls ``self.attn_drop`` (an ``nn.Dropout``) on
``attn.softmax(-1)``: a pre-hook there records that softmax, the attention
the tokens use (saved by autograd anyway), as probabilities.

``BEiTTransformerEncoderLayer.forward`` (``backbones/beit.py``) calls one
``self.drop_path`` on both branches, attention first: its keep is the call
right after the block's :class:`Attention` record. Layer scale
(``gamma_1``) leaves labels alone. Extra tokens and the readout (``out_type``
``'cls_token'``, or ``'avg_featmap'``: ``ln2`` of the patch mean) are the
ViT's.
"""
from functools import partial
from typing import List

import torch.nn as nn

from tlalign_mm.core import Attention

from .base import (
    Block,
    Recorder,
    _record_drop_path,
    check_head_reads_last_block,
)
from .vit import ViTRecorder


def _record_probs(recording, module, args) -> None:
    if recording.records is not None:
        recording.add(Attention(probs=args[0].detach()))


def _record_attention_branch(recording, module, args, output) -> None:
    if recording.records and isinstance(recording.records[-1], Attention):
        _record_drop_path(recording, module, args, output)


class BEiTRecorder(Recorder):
    """mmpretrain ``BEiTViT``. See the module docstring."""

    attention_types = ('mmpretrain.models.utils.attention.BEiTAttention', )
    # the ViT's class token and out_type readout (not a ViTRecorder: its
    # blocks are not MultiheadAttention ones)
    num_extra_tokens = ViTRecorder.num_extra_tokens
    readout = ViTRecorder.readout

    def check(self, backbone: nn.Module) -> None:
        check_head_reads_last_block(backbone, len(self.blocks(backbone)))

    def blocks(self, backbone: nn.Module) -> List[Block]:
        blocks = []
        for i, layer in enumerate(getattr(backbone, 'layers', ())):
            attn = getattr(layer, 'attn', None)
            if not self.is_attention(attn) or not isinstance(
                    attn.attn_drop, nn.Dropout) or not isinstance(
                        getattr(layer, 'drop_path', None), nn.Module):
                raise NotImplementedError(
                    'TL-Align records BEiT blocks whose attn is mmpretrain\'s '
                    'BEiTAttention (softmax into its nn.Dropout attn_drop) '
                    f'and that have a drop_path; block {i} is '
                    f'{type(layer).__name__} with {type(attn).__name__}.')
            blocks.append(Block(layer, attn, layer.drop_path))
        if not blocks:
            raise NotImplementedError(
                f'TL-Align records BEiTs whose blocks are backbone.layers; '
                f'{type(backbone).__name__} has none.')
        return blocks

    def record_attention(self, block: Block, recording) -> list:
        return [block.attention.attn_drop.register_forward_pre_hook(
            partial(_record_probs, recording))]

    def record_drop_path(self, block: Block, recording) -> list:
        if isinstance(block.drop_path, nn.Identity):
            return []
        return [block.drop_path.register_forward_hook(
            partial(_record_attention_branch, recording))]
