"""The public entry point: ``tlalign_mm.align_labels``."""
from typing import Iterable, List, Optional, Tuple, Union

import torch
import torch.nn as nn

from .aligned_forward import aligned_forward, check_mix_shapes
from .families import describe


def _check_distributions(name: str, x: torch.Tensor, dim: int) -> None:
    if not torch.isfinite(x).all():
        raise ValueError(f'{name} must be finite; it holds NaN or inf.')
    if (x < 0).any():
        raise ValueError(f'{name} must be non-negative; its smallest value '
                         f'is {x.min().item():.4g}.')
    total = x.sum(dim)
    if not torch.allclose(total, torch.ones_like(total), atol=1e-4):
        worst = (total - 1).abs().max().item()
        raise ValueError(
            f'{name} must sum to 1 over dim {dim} (distributions); the sums '
            f'are off by up to {worst:.4g}.')


def check_align_inputs(backbone: nn.Module, images: torch.Tensor,
                       pixel_weights: torch.Tensor, targets: torch.Tensor,
                       area_share: Optional[torch.Tensor]) -> None:
    """Every check of user-given inputs, before the forward: shapes, image
    channels, and the values of the mixing record and targets (the training
    step checks shapes only)."""
    if images.dim() != 4:
        raise ValueError(f'images must be (B, C, H, W), got '
                         f'{images.dim()}-D {tuple(images.shape)}.')
    embed = describe(backbone).embed
    conv = next((m for m in embed.modules() if isinstance(m, nn.Conv2d)),
                None)
    channels = getattr(conv, 'in_channels', getattr(embed, 'in_channels',
                                                    None))
    if isinstance(channels, int) and images.shape[1] != channels:
        raise ValueError(
            f'images have {images.shape[1]} channels but the backbone\'s '
            f'patch embedding takes {channels}.')
    # the shapes the training step checks too (pixel_weights, area_share)
    check_mix_shapes(images, pixel_weights, area_share)
    if targets.dim() != 3 or targets.shape[:2] != pixel_weights.shape[:2]:
        raise ValueError(
            f'targets must be (B, S, C) with (B, S) = '
            f'{tuple(pixel_weights.shape[:2])} from pixel_weights, got '
            f'{tuple(targets.shape)}.')
    _check_distributions('pixel_weights (each pixel\'s share of each '
                         'source)', pixel_weights.detach().float(), 1)
    _check_distributions('targets (each source\'s label distribution)',
                         targets.detach().float(), -1)
    if area_share is not None:
        _check_distributions('area_share (the class token\'s share of each '
                             'source)', area_share.detach().float(), 1)


@torch.no_grad()
def align_labels(
    backbone: nn.Module,
    images: torch.Tensor,
    pixel_weights: torch.Tensor,
    targets: torch.Tensor,
    area_share: Optional[torch.Tensor] = None,
    return_token_labels: bool = False,
    align_layers: Union[str, Iterable[int]] = 'all',
    residual_norm: bool = True,
    follow_drop_path: bool = True,
) -> Union[torch.Tensor, Tuple[torch.Tensor, List[torch.Tensor]]]:
    """Aligned labels of a mixed batch (TL-Align): the backbone's own
    forward runs once, without gradients, in its current train/eval mode,
    and every token's label moves with the attention it computes. Every
    input is checked first.

    Args:
        backbone (nn.Module): a backbone of a described family.
        images (Tensor): ``(B, C, H, W)`` mixed images.
        pixel_weights (Tensor): ``(B, S, H, W)``, each pixel's share of each
            source (distributions over ``S``).
        targets (Tensor): ``(B, S, C)``, each source's label distribution.
        area_share (Tensor, optional): ``(B, S)`` initial class-token label;
            defaults to each source's area share.
        return_token_labels (bool): also return the ``(B, N_l, S)`` token
            labels (source weights; ``labels @ targets`` in classes) before
            the first block and after every block.
        align_layers, residual_norm, follow_drop_path: the rule's options
            (:class:`tlalign_mm.core.AlignOptions`).

    Returns:
        Tensor: ``(B, C)`` the aligned label of what the model classifies
        from; with ``return_token_labels``, ``(labels, token_labels)``.
    """
    check_align_inputs(backbone, images, pixel_weights, targets, area_share)
    aligned = aligned_forward(backbone, images, pixel_weights, area_share,
                              dict(align_layers=align_layers,
                                   residual_norm=residual_norm,
                                   follow_drop_path=follow_drop_path),
                              keep_history=return_token_labels)
    labels = aligned.expand(targets)
    return (labels, aligned.history) if return_token_labels else labels
