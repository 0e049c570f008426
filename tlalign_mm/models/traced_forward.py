"""One forward pass of a backbone with its token labels aligned."""
from typing import Iterable, NamedTuple, Optional, Union

import torch
import torch.nn as nn

from tlalign_mm.core import AlignmentState

from .tracers import begin_trace, get_tracer, installed_session, label_math


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


def check_mix_shapes(images: torch.Tensor, pixel_weights: torch.Tensor,
                     cls_weights: Optional[torch.Tensor]) -> torch.Tensor:
    """Check the mixing record's shapes against the images; return
    ``cls_weights`` as float32 (each source's area share when not given).

    Only shapes are checked: that reads no tensor value, so it never makes a
    GPU wait. The values of a record made by the recording batch augments
    are right by construction; :func:`tlalign_mm.align_labels`, the entry
    point for records made by hand, also checks the values.
    """
    if pixel_weights.dim() != 4:
        raise ValueError('pixel_weights must be (B, S, H, W), got shape '
                         f'{tuple(pixel_weights.shape)}.')
    B, S, H, W = pixel_weights.shape
    if images.dim() != 4 or images.shape[0] != B or \
            tuple(images.shape[-2:]) != (H, W):
        raise ValueError(
            f'pixel_weights {tuple(pixel_weights.shape)} do not match images '
            f'{tuple(images.shape)}: they need the same batch size and '
            'height/width (record the mix on the final, padded batch).')
    if cls_weights is None:
        with label_math(pixel_weights.device.type):
            cls_weights = pixel_weights.float().mean((2, 3))
    if tuple(cls_weights.shape) != (B, S):
        raise ValueError(f'cls_weights must be (B, S) = {(B, S)}, got '
                         f'{tuple(cls_weights.shape)}.')
    return cls_weights.detach().float()


def traced_forward(backbone: nn.Module,
                   images: torch.Tensor,
                   pixel_weights: torch.Tensor,
                   cls_weights: Optional[torch.Tensor] = None,
                   align_layers: Union[str, Iterable[int], None] = None,
                   residual_norm: Optional[bool] = None,
                   follow_drop_path: Optional[bool] = None,
                   keep_history: bool = False) -> TracedOutput:
    """Run ``backbone(images)`` and align the token labels on the way.

    Args:
        backbone (nn.Module): a backbone a tracer supports: built by
            ``TLAlignBackbone`` (its options are the defaults here), or plain
            (tracing is installed for the call).
        images (Tensor): ``(B, 3, H, W)``.
        pixel_weights (Tensor): ``(B, S, H, W)``, each pixel's share of each
            source.
        cls_weights (Tensor, optional): ``(B, S)`` initial class-token label;
            defaults to each source's area share.
        align_layers, residual_norm, follow_drop_path: override the
            backbone's options for this call (see
            :class:`tlalign_mm.core.AlignmentState`); defaults ``'all'``,
            ``True``, ``True`` for a plain backbone.
        keep_history (bool): also return the labels after every block.
    """
    session = installed_session(backbone)
    tracer = get_tracer(backbone)
    if session is not None:
        num_layers = session.num_layers
        defaults = (session.align_layers, session.residual_norm,
                    session.follow_drop_path)
    else:
        num_layers = tracer.num_layers(backbone)
        defaults = ('all', True, True)
    align_layers, residual_norm, follow_drop_path = (
        default if given is None else given for given, default in zip(
            (align_layers, residual_norm, follow_drop_path), defaults))
    cls_weights = check_mix_shapes(images, pixel_weights, cls_weights)
    with label_math(images.device.type):
        labels = tracer.initial_labels(backbone, pixel_weights.float(),
                                       cls_weights)
    state = AlignmentState(labels, align_layers, residual_norm, num_layers,
                           keep_history, follow_drop_path)
    end_trace = begin_trace(backbone, tracer, state)
    try:
        feats = backbone(images)
    finally:
        end_trace()
    if state.layer != num_layers:
        raise RuntimeError(
            f'{type(backbone).__name__} ran {state.layer} traced blocks of '
            f'{num_layers}; its forward does not take the path the tracer '
            'expects, so its labels would be wrong.')
    read = state.labels
    if tracer.output_module(backbone) is not None:
        read = state.output_labels
        if read is None:
            raise RuntimeError(
                f'{type(backbone).__name__} never reached the stage whose '
                'output the head reads; TL-Align has no label for what the '
                'head classifies.')
    with label_math(images.device.type):
        weights = tracer.readout(backbone, read)
    return TracedOutput(feats, weights, state.history)
