"""What every recording batch augmentation shares.

A *recording* batch augmentation is an mmpretrain batch augmentation
(``__call__(inputs, scores) -> (inputs, scores)`` unchanged) with one more
method, ``mix_with_record(inputs, scores) -> (inputs, scores, MixRecord)``,
that makes the same mix from the same random draws and also says how every
pixel was mixed (:class:`~tlalign_mm.core.mix_record.MixRecord`).
"""
import math
from numbers import Real
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
from mmpretrain.models.utils.batch_augments import Mixup

from tlalign_mm.core.mix_record import MixRecord

from .grid import cells_to_pixels, grid_shape


def is_real(value: Any) -> bool:
    """A finite real number (a bool is not one)."""
    return isinstance(value, Real) and not isinstance(value, bool) and \
        math.isfinite(value)


def check_alpha(alpha: Any, owner: str) -> float:
    """``alpha`` as a float, or a ValueError naming ``owner`` and the fix
    (mmpretrain's ``Mixup``/``CutMix`` assert ``isinstance(alpha, float)``
    bare, ``alpha=1`` included)."""
    if not is_real(alpha) or alpha <= 0:
        raise ValueError(
            f'{owner}: alpha must be a positive number, the parameter of '
            'the Beta(alpha, alpha) distribution the mixing ratio is drawn '
            f'from (DeiT: 1.0 for CutMix, 0.8 for Mixup); got {alpha!r}')
    return float(alpha)


def check_positive_int(value: Any, name: str, owner: str,
                       meaning: str) -> int:
    """``value`` if it is an int >= 1, else a ValueError saying so."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'{owner}: {name} must be a positive int '
                         f'({meaning}); got {value!r}')
    return value


def check_cutmix_box(cutmix_minmax: Any, correct_lam: Any,
                     owner: str) -> Tuple[Optional[List[float]], bool]:
    """The box arguments of mmpretrain's ``CutMix`` (and ``ResizeMix``)
    checked, ``cutmix_minmax`` as a list of floats."""
    if cutmix_minmax is not None:
        ok = isinstance(cutmix_minmax, (list, tuple)) and len(
            cutmix_minmax) == 2 and all(map(is_real, cutmix_minmax))
        if not ok or not 0 < cutmix_minmax[0] < cutmix_minmax[1] <= 1:
            raise ValueError(
                f'{owner}: cutmix_minmax must be [min, max] with 0 < min '
                '< max <= 1, the range of the box side as a fraction of '
                f'the image side (e.g. [0.2, 0.8]); got {cutmix_minmax!r}')
        cutmix_minmax = [float(v) for v in cutmix_minmax]
    if not isinstance(correct_lam, bool):
        raise ValueError(f'{owner}: correct_lam must be True or False, '
                         f'got {correct_lam!r}')
    return cutmix_minmax, correct_lam


def draw_mix(alpha: float, batch_inputs: torch.Tensor,
             batch_scores: torch.Tensor
             ) -> Tuple[torch.Tensor, float, torch.Tensor]:
    """How every mmpretrain mix (``Mixup``, ``CutMix``, ``ResizeMix``)
    starts: ``(N, num_classes)`` scores checked and cast to float, then
    ``lam = np.random.beta(alpha, alpha)`` and ``index =
    torch.randperm(N)``, in that order."""
    assert batch_scores.ndim == 2, \
        'The input `batch_scores` should be a one-hot format tensor, ' \
        'which shape should be ``(N, num_classes)``.'
    lam = np.random.beta(alpha, alpha)
    return batch_scores.float(), lam, torch.randperm(batch_inputs.size(0))


def mix_pairs(batch: torch.Tensor, index: torch.Tensor,
              lam: float) -> torch.Tensor:
    """mmpretrain's ``lam * x + (1 - lam) * x[index]``: every mix's scores,
    Mixup's images."""
    return lam * batch + (1 - lam) * batch[index, :]


def mask_pixel_weights(mask: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``(B, 2, H, W)`` float32 pixel weights ``[~mask, mask]`` of a hard
    two-source mix whose ``(H, W)`` bool ``mask`` (True: from the partner)
    the whole batch shares."""
    weights = torch.stack([~mask, mask]).to(torch.float32)
    return weights.unsqueeze(0).expand(batch_size, -1, -1, -1).contiguous()


def paste_box(batch_inputs: torch.Tensor, batch_scores: torch.Tensor,
              index: torch.Tensor, box: Tuple[int, int, int, int],
              lam: float, patch: torch.Tensor, mode: str
              ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
    """A copy of ``batch_inputs`` with the box ``(y1, y2, x1, x2)`` filled
    by ``patch`` (made of the partners ``batch_inputs[index]`` alone:
    CutMix, ResizeMix), the mixed scores and the record (the partner's
    pixels are the box)."""
    y1, y2, x1, x2 = box
    mixed_inputs = batch_inputs.clone()
    mixed_inputs[:, :, y1:y2, x1:x2] = patch
    mask = torch.zeros(tuple(batch_inputs.shape[-2:]), dtype=torch.bool,
                       device=batch_inputs.device)
    mask[y1:y2, x1:x2] = True
    record = two_source_record(
        mask_pixel_weights(mask, batch_inputs.size(0)), index, lam, mode)
    return mixed_inputs, mix_pairs(batch_scores, index, lam), record


def two_source_record(pixel_weights: torch.Tensor, index: torch.Tensor,
                      lam: float, mode: str) -> MixRecord:
    """The record of a ``lam * x + (1 - lam) * x[index]``-style mix:
    ``source_index = [arange(B), index]``, ``area_share = [lam, 1 - lam]``
    (``lam`` the corrected ratio, also the scores'), ``(B, 2, H, W)``
    ``pixel_weights``."""
    device = pixel_weights.device
    batch_size = pixel_weights.size(0)
    source_index = torch.stack(
        [torch.arange(batch_size, device=device), index.to(device)], dim=1)
    lam = float(lam)
    area_share = torch.tensor([lam, 1. - lam], dtype=torch.float32,
                              device=device).repeat(batch_size, 1)
    return MixRecord(pixel_weights, source_index, area_share, mode)


class BaseCellMix(Mixup):
    """Base class of mixes that swap whole cells of the patch grid.

    One cell mask is drawn per batch (like CutMix's single box) and every
    image takes the masked cells from its partner ``x[index]``. The draws
    follow mmpretrain's ``Mixup``: ``lam = np.random.beta(alpha, alpha)``,
    ``index = torch.randperm(N)``, then the cells (numpy RNG,
    :meth:`sample_cell_mask`); ``lam`` then becomes the exact share of
    pixels kept from the first source, so the scores and ``area_share`` are
    the true area shares. Cells are ``patch_size`` pixels square; a partial
    last row / column (:mod:`.grid`) is drawn as one cell but counts by its
    pixels in ``lam``.

    Args:
        alpha (float): Parameter of the Beta distribution of ``lam``.
        patch_size (int): Side of a cell in pixels. Defaults to 16.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'cellmix'

    def __init__(self, alpha: float, patch_size: int = 16):
        owner = type(self).__name__
        super().__init__(alpha=check_alpha(alpha, owner))
        self.patch_size = check_positive_int(
            patch_size, 'patch_size', owner,
            "the side of a cell in pixels: the model's patch size")

    def sample_cell_mask(self, grid_hw: Tuple[int, int],
                         count: int) -> np.ndarray:
        """The ``(rows, cols)`` bool mask of the cells taken from the second
        source, about ``count = round((1 - lam) * rows * cols)`` of them
        (half rounds up)."""
        raise NotImplementedError(
            f'{type(self).__name__} must implement `sample_cell_mask`.')

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix ``(N, C, H, W)`` images (not in place) and ``(N,
        num_classes)`` one-hot scores, and record how (two sources)."""
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        batch_size = batch_inputs.size(0)
        img_shape = tuple(batch_inputs.shape[-2:])
        grid_hw = grid_shape(img_shape, self.patch_size)
        count = int(np.floor((1. - lam) * grid_hw[0] * grid_hw[1] + 0.5))
        cell_mask = self.sample_cell_mask(grid_hw, count)
        cell_mask = torch.from_numpy(np.asarray(cell_mask, dtype=bool))
        mask = cells_to_pixels(
            cell_mask.to(batch_inputs.device), img_shape, self.patch_size)
        lam = 1. - mask.sum().item() / float(img_shape[0] * img_shape[1])

        mixed_inputs = torch.where(mask, batch_inputs[index], batch_inputs)
        mixed_scores = mix_pairs(batch_scores, index, lam)
        record = two_source_record(
            mask_pixel_weights(mask, batch_size), index, lam, self.record_mode)
        return mixed_inputs, mixed_scores, record

    def mix(self, batch_inputs: torch.Tensor,
            batch_scores: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The mixed inputs and scores of :meth:`mix_with_record`."""
        return self.mix_with_record(batch_inputs, batch_scores)[:2]

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'patch_size={self.patch_size})'
