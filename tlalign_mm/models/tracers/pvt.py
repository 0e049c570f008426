"""TL-Align through mmdet's ``PyramidVisionTransformer`` and
``PyramidVisionTransformerV2``, built from mmpretrain's registry as
``type='mmdet.PyramidVisionTransformerV2'`` (so the weights load in mmdet
later).

The backbone runs its own forward; hooks only read what it computes:

- every stage's ``PatchEmbed`` (pre-hook, stages after the first): a new
  token's label is the mean of the labels under its receptive window, the
  conv's zero padding carrying no mass (v2's overlapping 7x7/3x3 embeddings
  included);
- ``SpatialReductionAttention`` (pre-hook): the keys and values come from
  tokens pooled by the strided ``sr`` conv, so a reduced token's label is
  the mean of the labels of the tokens it pools (rows/columns the conv's
  floor leaves out feed no key, like the tokens);
- its ``torch.nn.MultiheadAttention`` (hook): mmdet calls it with the
  default ``need_weights=True, average_attn_weights=True``, so it returns
  the head-averaged attention ``Ā`` the tokens used; the queries' new
  labels are ``(Y + Ā pool(Y)) / 2``. With attention dropout in training,
  the returned weights are after dropout: the labels then use the
  dropout-free weights of a second, gradient-free call of the same module;
- its ``dropout_layer`` (drop-path) keep mask, via ``record_drop_path``;
- the readout: the mean over the tokens of the last output stage.

Choices that are ours, not the paper's (whose models are ViT/DeiT/Swin):
the mean-under-window rule for overlapping patch embeddings and for the
spatial reduction, and leaving labels unchanged through v2's ``MixFFN``
although its 3x3 depth-wise conv mixes neighbouring tokens (the paper's
rule treats the MLP as token-wise).
"""
import sys
from contextlib import ExitStack, contextmanager
from typing import List, Optional

import torch
import torch.nn as nn

from tlalign_mm.core import (
    AlignmentState,
    flatten_label_map,
    label_map_of,
    window_mean,
)

from .base import (
    capture_output_labels,
    last_output_stage,
    patch_embed_labels,
    pooled_output_labels,
    record_drop_path,
)

_PVT_MODULE = 'mmdet.models.backbones.pvt'


def _pvt():
    """mmdet's pvt module if it is loaded (a PVT instance implies it is), so
    supporting PVT costs no mmdet import."""
    return sys.modules.get(_PVT_MODULE)



def reduced_labels(sra: nn.Module, labels: torch.Tensor, hw) -> torch.Tensor:
    """Labels of the keys of a ``SpatialReductionAttention``: the mean label
    of the tokens each ``sr`` window pools. ``(B, H*W, S)`` ->
    ``(B, h*w, S)``."""
    if sra.sr_ratio <= 1:
        return labels
    sr = sra.sr
    if isinstance(sr.padding, str):
        raise NotImplementedError('String padding in the spatial reduction '
                                  'conv is not supported by TL-Align.')
    return flatten_label_map(
        window_mean(label_map_of(labels, hw), sr.kernel_size, sr.stride,
                    sr.padding, sr.dilation))


@contextmanager
def trace_sra_block(sra: nn.Module, state: AlignmentState,
                    follow_drop_path: bool):
    """Trace one ``PVTEncoderLayer`` through its spatial-reduction
    attention."""
    mha = sra.attn
    if not isinstance(mha, nn.MultiheadAttention):
        raise NotImplementedError(
            'TL-Align traces PVT attention through torch.nn.MultiheadAttention'
            f'; this layer uses {type(mha).__name__}.')
    call: dict = {}
    keeps: List[Optional[torch.Tensor]] = []

    def before_sra(module, args, kwargs):
        call.clear()
        call['mha_calls'] = 0
        if not state.aligns(state.layer):
            return
        hw = args[1] if len(args) > 1 else kwargs['hw_shape']
        hw = (int(hw[0]), int(hw[1]))
        if state.labels.shape[1] != hw[0] * hw[1]:
            raise RuntimeError(
                f'The attention got a {hw[0]}x{hw[1]} map but the labels '
                f'hold {state.labels.shape[1]} tokens.')
        with torch.no_grad(), torch.autocast(state.labels.device.type,
                                             enabled=False):
            call['keys'] = reduced_labels(module, state.labels, hw)

    def after_mha(module, args, kwargs, output):
        call['mha_calls'] = call.get('mha_calls', 0) + 1
        if 'keys' not in call:
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
        keys = call.pop('keys')
        if weights.shape[-1] != keys.shape[1]:
            raise RuntimeError(
                f'The attention has {weights.shape[-1]} keys but TL-Align '
                f'pooled {keys.shape[1]} key labels.')
        with torch.no_grad(), torch.autocast(weights.device.type,
                                             enabled=False):
            call['attended'] = torch.bmm(weights.detach().float(), keys)

    def after_sra(module, args, kwargs, output):
        if call.get('mha_calls') != 1:
            raise RuntimeError(
                f'{type(module).__name__} called its attention '
                f'{call.get("mha_calls")} times in one forward; TL-Align '
                'expects exactly one call per block.')
        keep = keeps[-1] if (follow_drop_path and keeps) else None
        attended = call.get('attended')
        call.clear()
        keeps.clear()
        state.step(attended, keep)

    with ExitStack() as stack:
        stack.enter_context(record_drop_path(sra.dropout_layer, keeps))
        for handle in (
                sra.register_forward_pre_hook(before_sra, with_kwargs=True),
                mha.register_forward_hook(after_mha, with_kwargs=True),
                sra.register_forward_hook(after_sra, with_kwargs=True)):
            stack.callback(handle.remove)
        yield


class PVTTracer:
    """Token labels for mmdet's ``PyramidVisionTransformer`` (v1) and
    ``PyramidVisionTransformerV2``. See the module docstring for the rules
    and which of them are our choices.

    The readout is the mean over the tokens of the last stage in
    ``out_indices`` (the last of the forward's outputs, which
    ``GlobalAveragePooling`` and the head read).
    """

    @staticmethod
    def supports(backbone: nn.Module) -> bool:
        pvt = _pvt()
        return pvt is not None and isinstance(backbone,
                                              pvt.PyramidVisionTransformer)

    @staticmethod
    def _encoder_layers(stage):
        pvt = _pvt()
        return [m for m in stage[1] if isinstance(m, pvt.PVTEncoderLayer)]

    def num_layers(self, backbone) -> int:
        return sum(len(self._encoder_layers(s)) for s in backbone.layers)

    def initial_labels(self, backbone, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        return patch_embed_labels(backbone.layers[0][0], pixel_weights)

    @staticmethod
    def output_stage(backbone) -> int:
        return last_output_stage(len(backbone.layers), backbone.out_indices)

    @contextmanager
    def trace(self, backbone, state: AlignmentState,
              follow_drop_path: bool = True):
        def before_embed(module, args):
            x = args[0]
            with torch.no_grad(), torch.autocast(state.labels.device.type,
                                                 enabled=False):
                state.replace(
                    patch_embed_labels(module,
                                 label_map_of(state.labels, x.shape[-2:])))

        with ExitStack() as stack:
            for i, stage in enumerate(backbone.layers):
                if i > 0:
                    handle = stage[0].register_forward_pre_hook(before_embed)
                    stack.callback(handle.remove)
                for layer in self._encoder_layers(stage):
                    stack.enter_context(
                        trace_sra_block(layer.attn, state, follow_drop_path))
            # layers[i][2] is the stage's norm (nn.Identity in v1): it sees
            # the tokens the stage outputs.
            norm = backbone.layers[self.output_stage(backbone)][2]
            stack.enter_context(capture_output_labels(norm, state))
            yield

    def readout(self, backbone, state: AlignmentState) -> torch.Tensor:
        return pooled_output_labels(backbone, state,
                                    self.output_stage(backbone))
