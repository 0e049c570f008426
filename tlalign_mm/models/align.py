"""The public entry point: ``tlalign_mm.align_labels``."""
from typing import List, Optional, Tuple, Union

import torch
import torch.nn as nn

from .tlalign_backbone import TLAlignBackbone
from .traced_forward import traced_forward


@torch.no_grad()
def align_labels(
    backbone: nn.Module,
    images: torch.Tensor,
    pixel_weights: torch.Tensor,
    targets: torch.Tensor,
    cls_weights: Optional[torch.Tensor] = None,
    return_token_labels: bool = False,
) -> Union[torch.Tensor, Tuple[torch.Tensor, List[torch.Tensor]]]:
    """Aligned labels of a mixed batch (TL-Align).

    Runs the backbone's own forward once, without gradients, in whatever mode
    (train/eval) it is in, and moves every token's label with the attention
    that forward computes.

    Args:
        backbone (nn.Module): a plain mmpretrain backbone as built from a
            config, or a :class:`TLAlignBackbone` (its options apply).
        images (Tensor): ``(B, 3, H, W)`` mixed images.
        pixel_weights (Tensor): ``(B, S, H, W)``, each pixel's share of each
            source; non-negative, summing to 1 over ``S``.
        targets (Tensor): ``(B, S, C)``, each source's label distribution.
        cls_weights (Tensor, optional): ``(B, S)`` initial class-token label;
            defaults to each source's area share.
        return_token_labels (bool): also return the token labels, as source
            weights ``(B, N_l, S)``, before the first block and after every
            block (expand to classes with ``labels @ targets``).

    Returns:
        Tensor: ``(B, C)`` the aligned label of what the model classifies
        from (the class token, or the mean over tokens for pooled models);
        with ``return_token_labels``, a tuple ``(labels, token_labels)``.
    """
    if targets.dim() != 3 or targets.shape[:2] != pixel_weights.shape[:2]:
        raise ValueError(
            f'targets must be (B, S, C) with (B, S) = '
            f'{tuple(pixel_weights.shape[:2])} from pixel_weights, got '
            f'{tuple(targets.shape)}.')
    if isinstance(backbone, TLAlignBackbone):
        traced = backbone.forward_aligned(
            images, pixel_weights, cls_weights,
            keep_history=return_token_labels)
    else:
        traced = traced_forward(backbone, images, pixel_weights, cls_weights,
                                keep_history=return_token_labels)
    labels = traced.expand(targets)
    return (labels, traced.history) if return_token_labels else labels
