"""How far a model's training target (TL-Align's with its options, or
TransMix's) moves from the CutMix target (the paper's Fig. 3).

Both are source weights ``(B, S)`` (classes follow linearly, ``weights @
targets``): ``rmse`` is ``sqrt(mean_{b,s} (w_aligned - w_area)^2)`` (two
sources: the RMS change of ``lambda``, whatever the classes), ``rmse_class``
``sqrt(mean_b ||y_aligned - y_area||^2)`` in class space (0 for pairs of one
class), ``mean_abs`` ``mean_{b,s} |w_aligned - w_area|``.
"""
from typing import Dict, Iterable

import torch
import torch.nn as nn

from tlalign_mm.core import MixRecord
from tlalign_mm.models.aligned_forward import aligned_forward
from tlalign_mm.models.transmix import check_transmix_cfg, transmix_target


@torch.no_grad()
def aligned_source_weights(model: nn.Module, images: torch.Tensor,
                           record: MixRecord,
                           return_token_labels: bool = False):
    """The label ``model`` trains on, as source weights ``(B, S)`` (and
    optionally the token labels before and after every block): TL-Align's
    by its ``align_cfg`` (the default rule for a plain CutMix model), or
    TransMix's by its ``transmix_cfg`` for ``target='transmix'``."""
    if getattr(model, 'target', 'tlalign') == 'transmix':
        if return_token_labels:
            raise ValueError('TransMix gives no token labels; this analysis '
                             "needs TL-Align's (a target='tlalign' or "
                             "'cutmix' model).")
        return transmix_target(model.backbone, images, record,
                               **check_transmix_cfg(
                                   getattr(model, 'transmix_cfg', None))
                               ).weights
    aligned = aligned_forward(
        model.backbone, images, record.pixel_weights, record.area_share,
        getattr(model, 'align_cfg', None),
        keep_history=return_token_labels)
    return (aligned.weights, aligned.history) if return_token_labels else \
        aligned.weights


class RMSEMeter:
    """Accumulates the squared (and absolute) differences over batches."""

    def __init__(self):
        self.sq_weights = self.abs_weights = self.sq_class = 0.
        self.num_entries = self.num_images = 0

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


@torch.no_grad()
def label_rmse(model: nn.Module, batches: Iterable) -> Dict[str, float]:
    """The module doc's numbers, over :class:`~.mixed_batches.MixedBatch`
    es, of :func:`aligned_source_weights` against the area label."""
    meter = RMSEMeter()
    for batch in batches:
        aligned = aligned_source_weights(model, batch.mixed, batch.record)
        meter.update(aligned, batch.record.area_share, batch.targets)
    return meter.result()
