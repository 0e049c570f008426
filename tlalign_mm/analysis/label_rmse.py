"""How far TL-Align moves the CutMix target (the paper's Fig. 3).

Both labels are compared as source weights ``(B, S)`` (each source's share
of the label; expanding to classes is linear, ``weights @ targets``):

- ``rmse``: ``sqrt(mean_{b,s} (w_aligned - w_area)^2)``; for two sources it
  is the root mean square change of ``lambda``, whatever the classes.
- ``rmse_class``: ``sqrt(mean_b ||y_aligned - y_area||^2)`` in class space,
  0 for pairs of one class;
- ``mean_abs``: ``mean_{b,s} |w_aligned - w_area|`` (for two sources, the
  mean ``|lambda_aligned - lambda_area|``).
"""
from typing import Dict, Iterable

import torch

from tlalign_mm.models.align_labels import align_labels


def aligned_source_weights(backbone, images: torch.Tensor,
                           pixel_weights: torch.Tensor,
                           area_share: torch.Tensor,
                           return_token_labels: bool = False):
    """TL-Align's label of each sample as source weights ``(B, S)`` (and,
    optionally, the token labels after every block), from
    :func:`tlalign_mm.align_labels` with each source as its own class."""
    B, S = area_share.shape
    eye = torch.eye(S, device=images.device).expand(B, S, S)
    return align_labels(backbone, images, pixel_weights, eye, area_share,
                        return_token_labels=return_token_labels)


class RMSEMeter:
    """Accumulates the squared (and absolute) differences over batches."""

    def __init__(self):
        self.sq_weights = 0.
        self.abs_weights = 0.
        self.sq_class = 0.
        self.num_entries = 0
        self.num_images = 0

    def update(self, aligned: torch.Tensor, area: torch.Tensor,
               targets: torch.Tensor) -> None:
        """``aligned``, ``area``: ``(B, S)`` source weights; ``targets``:
        ``(B, S, C)``."""
        diff = aligned.double() - area.double()
        self.sq_weights += diff.pow(2).sum().item()
        self.abs_weights += diff.abs().sum().item()
        self.num_entries += diff.numel()
        class_diff = torch.einsum('bs,bsc->bc', diff, targets.double())
        self.sq_class += class_diff.pow(2).sum().item()
        self.num_images += diff.shape[0]

    def result(self) -> Dict[str, float]:
        n = max(self.num_entries, 1)
        return dict(
            rmse=(self.sq_weights / n)**0.5,
            rmse_class=(self.sq_class / max(self.num_images, 1))**0.5,
            mean_abs=self.abs_weights / n,
            num_images=self.num_images)


def label_rmse(backbone, batches: Iterable) -> Dict[str, float]:
    """RMSE between the area (CutMix) label and the TL-Align label over
    :class:`~tlalign_mm.analysis.mixed_batches.MixedBatch` es."""
    meter = RMSEMeter()
    for batch in batches:
        record = batch.record
        aligned = aligned_source_weights(backbone, batch.mixed,
                                         record.pixel_weights,
                                         record.area_share)
        meter.update(aligned, record.area_share, batch.targets)
    return meter.result()
