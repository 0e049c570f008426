"""Recording mmdet's ``PyramidVisionTransformer(V2)`` (built as
``type='mmdet.PyramidVisionTransformerV2'``, so weights load in mmdet).

- ``SpatialReductionAttention`` calls ``nn.MultiheadAttention`` with the
  defaults ``need_weights=True, average_attn_weights=True``: its forward
  hook records the head-averaged attention the tokens used. With attention
  dropout in training those weights are after dropout, so the hook records
  q and k instead, projected from the module's inputs with its ``in_proj``
  weights (the projection runs inside ``F.multi_head_attention_forward``,
  no module to hook): extra work and memory in that case only.
- ``SpatialReductionAttention``'s forward hook gives the :class:`Reduction`
  key map: a key's label is the mean label of the tokens its ``sr`` window
  pools.

Ours, not the paper's: the mean-under-window rule for overlapping
embeddings and the reduction; labels unchanged through v2's ``MixFFN``.
"""
from functools import partial
from typing import List, NamedTuple, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from tlalign_mm.core import Attention, label_map_of
from tlalign_mm.core.token_labels import as_conv_window, window_labels

from .base import Block, Recorder, last_output_stage


class Reduction(NamedTuple):
    """The keys of a spatial-reduction attention: ``sr`` windows over the
    ``hw`` token map (``kernel``/``stride`` 1: the tokens themselves)."""
    hw: Tuple[int, int]
    kernel: Tuple[int, int]
    stride: Tuple[int, int]
    padded = False

    def to_keys(self, labels: torch.Tensor) -> torch.Tensor:
        if self.stride == (1, 1) and self.kernel == (1, 1):
            return labels
        window = as_conv_window(self.kernel, self.stride)
        return window_labels(window, label_map_of(labels, self.hw))

    def to_queries(self, attended, mass):
        return attended, mass


def _projected(mha: nn.MultiheadAttention, x: torch.Tensor, part: int):
    """``(L, B, C)`` -> ``(B, H, L, d)``: the q (``part`` 0) or k (1)
    projection ``F.multi_head_attention_forward`` computes."""
    C, H = mha.embed_dim, mha.num_heads
    bias = None if mha.in_proj_bias is None else \
        mha.in_proj_bias[part * C:(part + 1) * C]
    with torch.no_grad():
        y = F.linear(x, mha.in_proj_weight[part * C:(part + 1) * C], bias)
    L, B = y.shape[:2]
    return y.view(L, B, H, C // H).permute(1, 2, 0, 3)


def _record_weights(recording, module, args, kwargs, output) -> None:
    if recording.records is None:
        return
    if not kwargs.get('need_weights', True) or \
            not kwargs.get('average_attn_weights', True):
        raise RuntimeError(
            'TL-Align records the head-averaged attention weights '
            'nn.MultiheadAttention returns (need_weights=True, '
            'average_attn_weights=True, its defaults); this call did not '
            'return them.')
    if module.training and module.dropout > 0:
        query = kwargs['query'] if 'query' in kwargs else args[0]
        key = kwargs['key'] if 'key' in kwargs else args[1]
        recording.add(Attention(_projected(module, query.detach(), 0),
                                _projected(module, key.detach(), 1)))
    else:
        recording.add(Attention(probs=output[1].detach()))


def _record_reduction(recording, module, args, kwargs, output) -> None:
    if recording.records is None:
        return
    hw = args[1] if len(args) > 1 else kwargs['hw_shape']
    one = (1, 1)
    sr = module.sr if module.sr_ratio > 1 else None
    recording.add(Reduction((int(hw[0]), int(hw[1])),
                            tuple(sr.kernel_size) if sr else one,
                            tuple(sr.stride) if sr else one))


def _pvt():
    """mmdet's pvt module (imported only when a PVT is recorded)."""
    from mmdet.models.backbones import pvt
    return pvt


class PVTRecorder(Recorder):
    """mmdet's ``PyramidVisionTransformer`` (v1) and
    ``PyramidVisionTransformerV2``. See the module docstring."""

    attention_types = (
        'mmdet.models.backbones.pvt.SpatialReductionAttention', )

    def check(self, backbone: nn.Module) -> None:
        if not isinstance(backbone, _pvt().PyramidVisionTransformer):
            raise NotImplementedError(
                'TL-Align records SpatialReductionAttention inside mmdet '
                'PyramidVisionTransformer(V2), not in '
                f'{type(backbone).__name__}.')
        for block in self.blocks(backbone):
            if not isinstance(block.attention.attn, nn.MultiheadAttention) \
                    or block.attention.attn.batch_first:
                raise NotImplementedError(
                    'TL-Align records PVT attention through '
                    'torch.nn.MultiheadAttention (batch_first=False); this '
                    f'layer uses {type(block.attention.attn).__name__}.')
            sr = getattr(block.attention, 'sr', None)
            if block.attention.sr_ratio > 1 and (
                    not isinstance(sr, nn.Conv2d) or sr.padding != (0, 0)):
                raise NotImplementedError(
                    'TL-Align records spatial reduction by an unpadded '
                    'strided Conv2d (mmdet PVT v1/v2); this layer has '
                    f'{sr}.')
        self.head_input(backbone)

    def blocks(self, backbone: nn.Module) -> List[Block]:
        layer_type = _pvt().PVTEncoderLayer
        return [
            Block(layer, layer.attn, layer.attn.dropout_layer)
            for stage in backbone.layers for layer in stage[1]
            if isinstance(layer, layer_type)
        ]

    def record_attention(self, block: Block, recording) -> list:
        sra = block.attention
        return [
            sra.attn.register_forward_hook(
                partial(_record_weights, recording), with_kwargs=True),
            sra.register_forward_hook(
                partial(_record_reduction, recording), with_kwargs=True),
        ]

    def patch_embed(self, backbone: nn.Module) -> nn.Module:
        return backbone.layers[0][0]

    def head_input(self, backbone: nn.Module) -> nn.Module:
        """``layers[i][2]``, the norm of the stage whose output is the
        forward's last (``nn.Identity`` in v1): it sees the tokens the stage
        outputs."""
        stage = last_output_stage(len(backbone.layers), backbone.out_indices)
        return backbone.layers[stage][2]
