"""TL-Align through ViTs whose attention calls an SDPA-like function held
as an instance attribute: mmpretrain's ``VisionTransformer`` (ViT, DeiT),
``DistilledVisionTransformer``, ``DeiT3``, SL-ViT (LSA is a
``MultiheadAttention`` subclass that calls it with its diagonal mask and
learned scale), and any backbone built the same way.

- Patch tokens start with their embedding's rule (:mod:`.token_rules`:
  mmcv ``PatchEmbed``'s window mean, SPT's five views); the class and
  distillation tokens with ``cls_weights``.
- Each block of ``backbone.layers`` moves labels with the head-averaged
  attention of its ``MultiheadAttention``: the tap stands in for the
  module's ``scaled_dot_product_attention`` attribute, and the labels ride
  along in that very call (:func:`tlalign_mm.core.attention_with_labels`).
- The readout follows ``out_type``: ``'cls_token'`` reads the class token,
  ``'avg_featmap'`` the mean over patch tokens, like the features.
"""
from typing import Callable, List

import torch
import torch.nn as nn
from mmengine.logging import MMLogger

from tlalign_mm.core import attention_with_labels

from .base import BlockTrace, TracedBlock, Tracer

_ATTR = 'scaled_dot_product_attention'


class AttentionFnTap:
    """Stands in for an attention module's SDPA-like function: outside a
    traced forward it calls the function as given; inside, it returns the
    same output and hands the block's trace ``Ā Y``."""

    def __init__(self, fn: Callable, trace: BlockTrace):
        self.fn = fn
        self.trace = trace
        self.logged = False

    def __call__(self, *args, **kwargs):
        state = self.trace.session.state
        if state is None:
            return self.fn(*args, **kwargs)
        if not state.aligns():
            self.trace.attend(None)
            return self.fn(*args, **kwargs)
        query, key, value = args[:3]
        attn_mask = args[3] if len(args) > 3 else kwargs.pop('attn_mask', None)
        dropout_p = args[4] if len(args) > 4 else kwargs.pop('dropout_p', 0.)
        if (dropout_p > 0 or query.dtype != torch.float32) and \
                not self.logged:
            self.logged = True
            MMLogger.get_current_instance().info(
                f'TL-Align: {self.trace.name} attends with dropout '
                f'{dropout_p} / dtype {query.dtype}; its labels come from a '
                'second, dropout-free float32 pass.')
        out, attended = attention_with_labels(self.fn, query, key, value,
                                              state.labels, attn_mask,
                                              dropout_p, **kwargs)
        self.trace.attend(attended)
        return out


def tap_attention_fn(module: nn.Module, trace: BlockTrace,
                     attr: str = _ATTR) -> Callable[[], None]:
    """Put an :class:`AttentionFnTap` in ``module.<attr>``; return the
    function that puts the original back."""
    owned = attr in module.__dict__
    original = getattr(module, attr)
    setattr(module, attr, AttentionFnTap(original, trace))

    def remove():
        if owned:
            setattr(module, attr, original)
        else:
            delattr(module, attr)

    return remove


class ViTTracer(Tracer):
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
                f'TL-Align traces ViTs whose blocks are backbone.layers; '
                f'{type(backbone).__name__} has none.')
        self.blocks(backbone)

    def blocks(self, backbone: nn.Module) -> List[TracedBlock]:
        blocks = []
        for i, layer in enumerate(backbone.layers):
            attns = [m for m in layer.modules() if self.is_attention(m)]
            if len(attns) != 1 or not callable(getattr(attns[0], _ATTR,
                                                       None)):
                raise NotImplementedError(
                    f'TL-Align traces ViT blocks with one mmpretrain '
                    f'MultiheadAttention that calls its {_ATTR}; block {i} '
                    f'({type(layer).__name__}) has {len(attns)}.')
            attn = attns[0]
            blocks.append(
                TracedBlock(layer, attn, getattr(attn, 'out_drop', None)))
        return blocks

    def num_extra_tokens(self, backbone: nn.Module) -> int:
        return getattr(backbone, 'num_extra_tokens', 0)

    def tap_attention(self, block: TracedBlock,
                      trace: BlockTrace) -> List[Callable[[], None]]:
        return [tap_attention_fn(block.attention, trace)]

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
