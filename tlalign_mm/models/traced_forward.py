"""One forward pass of a backbone with its token labels aligned."""
from typing import Iterable, NamedTuple, Optional, Union

import torch
import torch.nn as nn

from tlalign_mm.core import AlignmentState

from .tracers import get_tracer


class TracedOutput(NamedTuple):
    """Result of :func:`traced_forward`.

    Attributes:
        feats: the backbone's own outputs, exactly as its forward returns.
        weights (Tensor): ``(B, S)`` aligned label, as source weights, of what
            the model classifies from.
        history (list[Tensor]): ``(B, N_l, S)`` token labels before the first
            block and after every block (empty unless requested).
    """
    feats: tuple
    weights: torch.Tensor
    history: list

    def expand(self, targets: torch.Tensor) -> torch.Tensor:
        """Aligned labels in class space, ``(B, C)``, from the sources'
        ``(B, S, C)`` label distributions; float32 even under autocast."""
        with torch.autocast(targets.device.type, enabled=False):
            return torch.einsum('bs,bsc->bc', self.weights.float(),
                                targets.float())


def check_mix_inputs(images: torch.Tensor, pixel_weights: torch.Tensor,
                     cls_weights: Optional[torch.Tensor]) -> torch.Tensor:
    """Validate the mixing record against the images; return cls_weights
    (each source's area share when not given)."""
    if pixel_weights.dim() != 4:
        raise ValueError('pixel_weights must be (B, S, H, W), got shape '
                         f'{tuple(pixel_weights.shape)}.')
    B, S, H, W = pixel_weights.shape
    if images.shape[0] != B or tuple(images.shape[-2:]) != (H, W):
        raise ValueError(
            f'pixel_weights {tuple(pixel_weights.shape)} do not match images '
            f'{tuple(images.shape)}: they need the same batch size and '
            'height/width (record the mix on the final, padded batch).')
    pw = pixel_weights.detach().float()
    if (pw < 0).any():
        raise ValueError('pixel_weights must be non-negative.')
    if not torch.allclose(pw.sum(1), torch.ones_like(pw[:, 0]), atol=1e-4):
        raise ValueError(
            'pixel_weights must sum to 1 over sources at every pixel (each '
            "pixel's share of each source).")
    if cls_weights is None:
        cls_weights = pw.mean((2, 3))
    cls_weights = cls_weights.detach().float()
    if cls_weights.shape != (B, S):
        raise ValueError(f'cls_weights must be (B, S) = {(B, S)}, got '
                         f'{tuple(cls_weights.shape)}.')
    if (cls_weights < 0).any() or not torch.allclose(
            cls_weights.sum(1), torch.ones_like(cls_weights[:, 0]),
            atol=1e-4):
        raise ValueError('cls_weights must be non-negative and sum to 1.')
    return cls_weights


def traced_forward(backbone: nn.Module,
                   images: torch.Tensor,
                   pixel_weights: torch.Tensor,
                   cls_weights: Optional[torch.Tensor] = None,
                   align_layers: Union[str, Iterable[int]] = 'all',
                   residual_norm: bool = True,
                   follow_drop_path: bool = True,
                   keep_history: bool = False) -> TracedOutput:
    """Run ``backbone(images)`` and align the token labels on the way.

    Args:
        backbone (nn.Module): a plain backbone a tracer supports.
        images (Tensor): ``(B, 3, H, W)``.
        pixel_weights (Tensor): ``(B, S, H, W)``, each pixel's share of each
            source.
        cls_weights (Tensor, optional): ``(B, S)`` initial class-token label;
            defaults to each source's area share.
        align_layers, residual_norm: see
            :class:`tlalign_mm.core.AlignmentState`.
        follow_drop_path (bool): samples whose attention branch drop-path
            removed keep their labels in that block. ``False`` reproduces the
            original TL-Align code, which ignores drop-path.
        keep_history (bool): also return the labels after every block.
    """
    tracer = get_tracer(backbone)
    cls_weights = check_mix_inputs(images, pixel_weights, cls_weights)
    # Label arithmetic stays in float32 under autocast (conv and matmul
    # would otherwise run in bf16/fp16 and round the labels).
    with torch.no_grad(), torch.autocast(images.device.type, enabled=False):
        labels = tracer.initial_labels(backbone, pixel_weights.float(),
                                       cls_weights)
    num_layers = tracer.num_layers(backbone)
    state = AlignmentState(labels, align_layers, residual_norm, num_layers,
                           keep_history)
    with tracer.trace(backbone, state, follow_drop_path):
        feats = backbone(images)
    if state.layer != num_layers:
        raise RuntimeError(
            f'{type(backbone).__name__} ran {state.layer} traced blocks of '
            f'{num_layers}; its forward does not take the path the tracer '
            'expects, so its labels would be wrong.')
    with torch.autocast(images.device.type, enabled=False):
        weights = tracer.readout(backbone, state)
    return TracedOutput(feats, weights, state.history)
