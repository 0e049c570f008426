"""TL-Align through Swin transformers with Shifted Patch Tokenization (SL-Swin,
or any ``SwinTransformer`` with SPT as patch embedding or between stages).

Everything is :class:`SwinTracer`'s (window attention, drop-path, padding
rule, readout) except where SPT replaces a module:

- SPT patch embedding: a token's label is the mean pixel weight over the
  five views that feed it, zero-padded pixels carrying no mass;
- SPT pooling between stages (pre-hook): like patch merging, a pooled
  token's label is the mean label of the tokens its window reads, here over
  the five shifted windows, zero-padded positions carrying no mass
  (:func:`spt_token_labels` on the token label map).

Locality Self-Attention in the windows (``LocalityWindowMSA``) is a
``WindowMSA`` that computes its softmax once through ``self.softmax``, after
its learned scale, the relative position bias, the shift mask and the
``-inf`` diagonal: SwinTracer's softmax hook reads exactly that attention.
"""
from contextlib import contextmanager

import torch
import torch.nn as nn
from mmpretrain.models.backbones import SwinTransformer

from tlalign_mm.core import AlignmentState, label_map_of

from ..spt_lsa.spt import ShiftedPatchTokenization, spt_token_labels
from .base import patch_embed_labels
from .swin import SwinTracer


@contextmanager
def trace_spt_pooling(spt: ShiftedPatchTokenization, state: AlignmentState):
    """While active, ``spt`` (pooling a token map) replaces the labels with
    those of the tokens it makes."""

    def before_pool(module, args, kwargs):
        hw = args[1] if len(args) > 1 else kwargs['input_size']
        hw = (int(hw[0]), int(hw[1]))
        if state.labels.shape[1] != hw[0] * hw[1]:
            raise RuntimeError(
                f'SPT pooling got a {hw[0]}x{hw[1]} map but the labels hold '
                f'{state.labels.shape[1]} tokens.')
        with torch.no_grad(), torch.autocast(state.labels.device.type,
                                             enabled=False):
            state.replace(
                spt_token_labels(module, label_map_of(state.labels, hw)))

    handle = spt.register_forward_pre_hook(before_pool, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class SLSwinTracer(SwinTracer):
    """:class:`SwinTracer` with SPT patch embedding and SPT pooling. Goes
    before SwinTracer in ``TRACERS``."""

    @staticmethod
    def supports(backbone: nn.Module) -> bool:
        if not isinstance(backbone, SwinTransformer):
            return False
        return isinstance(backbone.patch_embed, ShiftedPatchTokenization) or \
            any(isinstance(stage.downsample, ShiftedPatchTokenization)
                for stage in backbone.stages)

    def initial_labels(self, backbone, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        if isinstance(backbone.patch_embed, ShiftedPatchTokenization):
            return spt_token_labels(backbone.patch_embed, pixel_weights)
        return patch_embed_labels(backbone.patch_embed, pixel_weights)

    def trace_downsample(self, downsample: nn.Module, state: AlignmentState):
        if isinstance(downsample, ShiftedPatchTokenization):
            return trace_spt_pooling(downsample, state)
        return super().trace_downsample(downsample, state)
