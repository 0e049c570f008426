"""One forward pass of a backbone, recorded (:mod:`.taps`), and its labels
aligned (:func:`tlalign_mm.core.align`) up to what the head reads."""
from typing import Mapping, NamedTuple, Optional, Union

import torch
import torch.nn as nn

from tlalign_mm.core import AlignOptions, align, align_options

from .taps import Recording


class AlignedOutput(NamedTuple):
    """The backbone's own outputs ``feats``; ``weights`` ``(B, S)``, the
    aligned label (source weights) of what the model classifies from; the
    ``(B, N_l, S)`` token labels before the first block and after every
    block (``history``, empty unless asked for)."""
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
                     area_share: Optional[torch.Tensor]) -> None:
    """The mixing record's shapes against the images (no values: those
    would make a GPU wait; a record the batch augments make is right by
    construction, and :func:`tlalign_mm.align_labels` checks hand-made
    ones' values)."""
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
    if area_share is not None and tuple(area_share.shape) != (B, S):
        raise ValueError(f'area_share must be (B, S) = {(B, S)}, got '
                         f'{tuple(area_share.shape)}.')


def aligned_forward(backbone: nn.Module,
                    images: torch.Tensor,
                    pixel_weights: torch.Tensor,
                    area_share: Optional[torch.Tensor] = None,
                    options: Union[AlignOptions, Mapping, None] = None,
                    keep_history: bool = False,
                    recording: Optional[Recording] = None) -> AlignedOutput:
    """Run ``backbone(images)`` (``(B, 3, H, W)``, a described family),
    recorded, and align the token labels from ``pixel_weights`` ``(B, S, H,
    W)``; ``area_share`` ``(B, S)`` is the extra tokens' initial label
    (default each source's pixel share); ``options``: the rule's
    :class:`~tlalign_mm.core.AlignOptions` (a dict of its fields is checked
    into one; default the paper's rule). ``recording``: taps already on
    ``backbone`` (the classifier keeps one, so a compiled step registers no
    hooks); by default they are put on for this call. The alignment runs
    under the profiler label ``tlalign.align``."""
    options = align_options(options)
    check_mix_shapes(images, pixel_weights, area_share)
    own = recording is None
    if own:
        recording = Recording(backbone)
    elif recording.backbone is not backbone:
        raise ValueError('recording records another backbone.')
    try:
        feats, recorded = recording(images)
    finally:
        if own:
            recording.remove()
    with torch.profiler.record_function('tlalign.align'):
        weights, history = align(recorded, pixel_weights, area_share,
                                 options, keep_history)
    return AlignedOutput(feats, weights, history)
