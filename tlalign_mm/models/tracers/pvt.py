"""TL-Align through mmdet's ``PyramidVisionTransformer`` and
``PyramidVisionTransformerV2``, built from mmpretrain's registry as
``type='mmdet.PyramidVisionTransformerV2'`` (so the weights load in mmdet
later).

The backbone runs its own forward; the taps only read what it computes:

- ``SpatialReductionAttention`` (pre-hook): the keys and values come from
  tokens pooled by the strided ``sr`` conv, so a reduced token's label is
  the mean of the labels of the tokens it pools (rows/columns the conv's
  floor leaves out feed no key, like the tokens);
- its ``torch.nn.MultiheadAttention`` (hook): mmdet calls it with the
  default ``need_weights=True, average_attn_weights=True``, so it returns
  the head-averaged attention ``Ā`` the tokens used; ``Ā Y`` is ``Ā``
  applied to the reduced labels. With attention dropout in training the
  returned weights are after dropout: the labels then use the dropout-free
  weights of a second, gradient-free call of the same module.

Every stage's patch embedding (mmdet ``PatchEmbed``, v2's overlapping 7x7 /
3x3 included), drop-path, and the readout (the mean over the tokens of the
last output stage) are the protocol's (:mod:`.base`, :mod:`.token_rules`).

Choices that are ours, not the paper's (whose models are ViT/DeiT/Swin):
the mean-under-window rule for overlapping patch embeddings and for the
spatial reduction, and leaving labels unchanged through v2's ``MixFFN``
although its 3x3 depth-wise conv mixes neighbouring tokens (the paper's
rule treats the MLP as token-wise).
"""
from typing import Callable, List, Optional

import torch
import torch.nn as nn

from tlalign_mm.core import label_map_of

from .base import (
    BlockTrace,
    TracedBlock,
    Tracer,
    label_math,
    last_output_stage,
)
from .token_rules import window_labels


def reduced_labels(sra: nn.Module, labels: torch.Tensor, hw) -> torch.Tensor:
    """Labels of the keys of a ``SpatialReductionAttention``: the mean label
    of the tokens each ``sr`` window pools. ``(B, H*W, S)`` ->
    ``(B, h*w, S)``."""
    if sra.sr_ratio <= 1:
        return labels
    return window_labels(sra.sr, None, label_map_of(labels, hw))


class SRAttentionTap:
    """The hooks that hand one ``PVTEncoderLayer``'s trace its ``Ā Y``."""

    def __init__(self, trace: BlockTrace):
        self.trace = trace
        self.keys: Optional[torch.Tensor] = None

    def before_sra(self, module, args, kwargs):
        state = self.trace.state
        self.keys = None
        if state is None or not state.aligns():
            return
        hw = args[1] if len(args) > 1 else kwargs['hw_shape']
        hw = (int(hw[0]), int(hw[1]))
        if state.labels.shape[1] != hw[0] * hw[1]:
            raise RuntimeError(
                f'The attention got a {hw[0]}x{hw[1]} map but the labels '
                f'hold {state.labels.shape[1]} tokens.')
        with label_math(state.labels.device.type):
            self.keys = reduced_labels(module, state.labels, hw)

    def after_mha(self, module, args, kwargs, output):
        if self.trace.state is None:
            return
        if self.keys is None:
            self.trace.attend(None)
            return
        weights = output[1] if isinstance(output, tuple) else None
        if (weights is None or weights.dim() != 3
                or not kwargs.get('average_attn_weights', True)):
            raise RuntimeError(
                'TL-Align reads the head-averaged attention weights '
                'nn.MultiheadAttention returns (need_weights=True, '
                'average_attn_weights=True, its defaults); this call did not '
                'return them.')
        if module.training and module.dropout > 0:
            # The returned weights are after dropout: recompute without it
            # (no RNG is drawn, the tokens are untouched).
            dropout = module.dropout
            module.dropout = 0.
            try:
                with torch.no_grad():
                    weights = type(module).forward(module, *args, **kwargs)[1]
            finally:
                module.dropout = dropout
        keys, self.keys = self.keys, None
        if weights.shape[-1] != keys.shape[1]:
            raise RuntimeError(
                f'The attention has {weights.shape[-1]} keys but TL-Align '
                f'pooled {keys.shape[1]} key labels.')
        with label_math(weights.device.type):
            self.trace.attend(torch.bmm(weights.detach().float(), keys))


def _pvt():
    """mmdet's pvt module (imported only when a PVT is traced)."""
    from mmdet.models.backbones import pvt
    return pvt


class PVTTracer(Tracer):
    """mmdet's ``PyramidVisionTransformer`` (v1) and
    ``PyramidVisionTransformerV2``. See the module docstring."""

    attention_types = (
        'mmdet.models.backbones.pvt.SpatialReductionAttention', )

    def check(self, backbone: nn.Module) -> None:
        if not isinstance(backbone, _pvt().PyramidVisionTransformer):
            raise NotImplementedError(
                'TL-Align traces SpatialReductionAttention inside mmdet '
                'PyramidVisionTransformer(V2), not in '
                f'{type(backbone).__name__}.')
        self.output_module(backbone)

    def blocks(self, backbone: nn.Module) -> List[TracedBlock]:
        layer_type = _pvt().PVTEncoderLayer
        return [
            TracedBlock(layer, layer.attn, layer.attn.dropout_layer)
            for stage in backbone.layers for layer in stage[1]
            if isinstance(layer, layer_type)
        ]

    def patch_embed(self, backbone: nn.Module) -> nn.Module:
        return backbone.layers[0][0]

    def tap_attention(self, block: TracedBlock,
                      trace: BlockTrace) -> List[Callable[[], None]]:
        sra = block.attention
        if not isinstance(sra.attn, nn.MultiheadAttention):
            raise NotImplementedError(
                'TL-Align traces PVT attention through '
                f'torch.nn.MultiheadAttention; this layer uses '
                f'{type(sra.attn).__name__}.')
        tap = SRAttentionTap(trace)
        handles = [
            sra.register_forward_pre_hook(tap.before_sra, with_kwargs=True),
            sra.attn.register_forward_hook(tap.after_mha, with_kwargs=True),
        ]
        return [h.remove for h in handles]

    def output_module(self, backbone: nn.Module) -> nn.Module:
        """``layers[i][2]``, the norm of the stage whose output is the
        forward's last (``nn.Identity`` in v1): it sees the tokens the stage
        outputs."""
        stage = last_output_stage(len(backbone.layers), backbone.out_indices)
        return backbone.layers[stage][2]
