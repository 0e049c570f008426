"""TL-Align through ViTs whose patch embedding is Shifted Patch Tokenization
(SL-ViT, or any ``VisionTransformer`` with an SPT ``patch_embed``).

Only the initial labels differ from :class:`ViTTracer`: an SPT token's label
is the mean pixel weight over the five views that feed it (its patch window
in the image and in the four diagonally shifted copies), zero-padded pixels
carrying no mass (:func:`spt_token_labels`). The blocks are ViTTracer's:
Locality Self-Attention is a ``MultiheadAttention`` subclass that calls its
``scaled_dot_product_attention`` attribute with its diagonal ``-inf`` mask
and learned scale, so the intercepted call aligns the labels with exactly
LSA's masked attention (zero diagonal, learned temperature).
"""
import torch
import torch.nn as nn
from mmpretrain.models.backbones import VisionTransformer

from tlalign_mm.core import with_extra_tokens

from ..spt_lsa.spt import ShiftedPatchTokenization, spt_token_labels
from .vit import ViTTracer


class SLViTTracer(ViTTracer):
    """:class:`ViTTracer` with SPT initial labels. Goes before ViTTracer in
    ``TRACERS``."""

    @staticmethod
    def supports(backbone: nn.Module) -> bool:
        return isinstance(backbone, VisionTransformer) and isinstance(
            backbone.patch_embed, ShiftedPatchTokenization)

    def initial_labels(self, backbone, pixel_weights: torch.Tensor,
                       cls_weights: torch.Tensor) -> torch.Tensor:
        patches = spt_token_labels(backbone.patch_embed, pixel_weights)
        return with_extra_tokens(patches, cls_weights,
                                 backbone.num_extra_tokens)
