"""TL-Align through mmpretrain's ``VisionTransformer`` (ViT, DeiT, distilled
DeiT)."""
from contextlib import ExitStack, contextmanager

import torch
import torch.nn as nn
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.models.utils import MultiheadAttention

from tlalign_mm.core import AlignmentState, with_extra_tokens

from .base import patch_embed_labels, trace_block


class ViTTracer:
    """Token labels for :class:`mmpretrain.models.VisionTransformer` and its
    subclasses (``DistilledVisionTransformer``).

    - Patch tokens start with the mean pixel weights of their patch (the
      patch embedding's own padding carries no mass); the class and
      distillation tokens start with ``cls_weights``.
    - Each ``TransformerEncoderLayer`` moves labels with the head-averaged
      attention of its ``MultiheadAttention``; nothing else does.
    - The readout follows ``out_type``: ``'cls_token'`` reads the class token,
      ``'avg_featmap'`` the mean over patch tokens, like the features.
    """

    @staticmethod
    def supports(backbone: nn.Module) -> bool:
        return isinstance(backbone, VisionTransformer)

    @staticmethod
    def num_layers(backbone) -> int:
        return len(backbone.layers)

    def initial_labels(self, backbone, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        patches = patch_embed_labels(backbone.patch_embed, pixel_weights)
        return with_extra_tokens(patches, cls_weights,
                                 backbone.num_extra_tokens)

    @contextmanager
    def trace(self, backbone, state: AlignmentState,
              follow_drop_path: bool = True):
        with ExitStack() as stack:
            for layer in backbone.layers:
                attn = layer.attn
                if not isinstance(attn, MultiheadAttention):
                    raise NotImplementedError(
                        f'TL-Align traces mmpretrain MultiheadAttention; '
                        f'this layer uses {type(attn).__name__}.')
                stack.enter_context(
                    trace_block(attn, attn.out_drop, state, follow_drop_path))
            yield

    def readout(self, backbone, state: AlignmentState) -> torch.Tensor:
        labels = state.labels
        out_type = backbone.out_type
        if out_type == 'cls_token':
            return labels[:, 0]
        if out_type == 'avg_featmap':
            return labels[:, backbone.num_extra_tokens:].mean(1)
        raise ValueError(
            f'TL-Align needs the label of what the head classifies, but the '
            f"backbone's out_type={out_type!r} gives token maps. Use "
            "out_type='cls_token' or 'avg_featmap'.")
