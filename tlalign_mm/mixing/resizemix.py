"""ResizeMix that records how it mixed."""
import math
from numbers import Real
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import ResizeMix
from mmpretrain.registry import BATCH_AUGMENTS

from tlalign_mm.core.mix_record import MixRecord

from .base import check_alpha, check_cutmix_box, draw_mix, paste_box

# The modes F.interpolate accepts for a 4-D batch with align_corners=False,
# which ResizeMix.mix passes (mmpretrain's docstring also lists 'nearest',
# 'linear', 'trilinear' and 'area': each raises inside its mix).
INTERPOLATIONS = ('bilinear', 'bicubic')


def _check_lam_range(lam_min, lam_max, owner: str) -> Tuple[float, float]:
    """``(lam_min, lam_max)`` as floats with ``0 <= lam_min <= lam_max < 1``,
    or a ValueError saying what they mean."""
    ok = all(isinstance(v, Real) and not isinstance(v, bool)
             and math.isfinite(v) for v in (lam_min, lam_max))
    if not ok or not 0 <= lam_min <= lam_max < 1:
        raise ValueError(
            f'{owner}: lam_min and lam_max must satisfy 0 <= lam_min <= '
            'lam_max < 1: lam, the share of each image that stays its own '
            '(the pasted box covers about 1 - lam), is drawn in [lam_min, '
            'lam_max]; lam_max = 1 would allow an empty box (defaults 0.1, '
            f'0.8); got lam_min={lam_min!r}, lam_max={lam_max!r}')
    return float(lam_min), float(lam_max)


@BATCH_AUGMENTS.register_module()
class TLResizeMix(ResizeMix):
    """mmpretrain's :class:`ResizeMix`, plus a record of the mix for TL-Align.

    ResizeMix (Qin et al. 2020) pastes the whole partner image ``x[index]``,
    resized to a CutMix box, into every image. ``__call__`` and ``mix`` are
    mmpretrain's, unchanged. :meth:`mix_with_record` draws the same random
    numbers in the same order as ``mmpretrain.models.ResizeMix.mix``
    (``np.random.beta``, ``torch.randperm``, then the ``np.random.randint``
    calls of CutMix's ``rand_bbox`` / ``rand_bbox_minmax``) and resizes with
    the same ``F.interpolate`` call, so given the same numpy and torch RNG
    state it gives exactly mmpretrain's mixed inputs and scores.

    Lambda (mmpretrain ``resizemix.py:81-87``): ``lam = Beta(alpha, alpha) *
    (lam_max - lam_min) + lam_min`` (the class docstring's formula divides;
    the code multiplies), the box side is ``sqrt(1 - lam)`` of the image
    side (CutMix's ``rand_bbox``), and with ``correct_lam`` (the default)
    or ``cutmix_minmax`` lam becomes ``1 - clipped box area / image area``;
    with ``correct_lam=False`` it stays the drawn one and differs from the
    box area, exactly as the mixed scores do.

    The record has two sources: every pixel of the box is a pixel of the
    resized ``x[index]``, made from that image's pixels only, so
    ``pixel_weights[:, 1]`` is 1 inside the box and ``pixel_weights[:, 0]`` is
    1 outside it, as for CutMix (TL-Align's labels count each source's share
    of the *mixed* image's pixels, not of its own image, which the box holds
    whole). ``source_index[:, 1]`` is ``index``; ``area_share`` is ``(lam,
    1 - lam)`` with mmpretrain's lambda.

    Args:
        alpha (float): Parameter of the Beta distribution, see
            :class:`ResizeMix`.
        lam_min (float): The minimum of lam. Defaults to 0.1.
        lam_max (float): The maximum of lam. Defaults to 0.8.
        interpolation (str): ``'bilinear'`` or ``'bicubic'``, the mode of
            the resize. Defaults to ``'bilinear'``.
        cutmix_minmax (List[float], optional), correct_lam (bool): The box
            options of :class:`CutMix` (defaults None, True).
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'resizemix'

    def __init__(self,
                 alpha: float,
                 lam_min: float = 0.1,
                 lam_max: float = 0.8,
                 interpolation: str = 'bilinear',
                 cutmix_minmax: Optional[List[float]] = None,
                 correct_lam: bool = True):
        owner = type(self).__name__
        lam_min, lam_max = _check_lam_range(lam_min, lam_max, owner)
        if interpolation not in INTERPOLATIONS:
            raise ValueError(
                f'{owner}: interpolation must be one of {INTERPOLATIONS}, '
                'the modes F.interpolate takes for image batches with the '
                'align_corners=False that ResizeMix passes; got '
                f'{interpolation!r}')
        cutmix_minmax, correct_lam = check_cutmix_box(cutmix_minmax,
                                                      correct_lam, owner)
        super().__init__(
            alpha=check_alpha(alpha, owner),
            lam_min=lam_min,
            lam_max=lam_max,
            interpolation=interpolation,
            cutmix_minmax=cutmix_minmax,
            correct_lam=correct_lam)

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix the batch like :meth:`ResizeMix.mix` (the inputs, of a dtype
        ``F.interpolate`` takes, not in place) and record how (two
        sources): ``(mixed inputs, mixed float scores, record)``, the
        protocol of :mod:`~.base`.

        Raises:
            ValueError: If the drawn box is empty (where mmpretrain's
                ``F.interpolate`` call fails): images of a few pixels, or
                ``lam_max`` close to 1.
        """
        # Same draws, same order, same arithmetic as mmpretrain's
        # ResizeMix.mix.
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        lam = lam * (self.lam_max - self.lam_min) + self.lam_min
        img_shape = batch_inputs.shape[-2:]
        box, lam = self.cutmix_bbox_and_lam(img_shape, lam)
        y1, y2, x1, x2 = box
        if y2 <= y1 or x2 <= x1:
            raise ValueError(
                f'{type(self).__name__}: the box drawn for '
                f'{img_shape[0]}x{img_shape[1]} images is empty '
                f'(rows {y1}:{y2}, columns {x1}:{x2}): there is no room to '
                'paste the resized image (mmpretrain\'s ResizeMix fails here '
                'in F.interpolate). Use larger images, a smaller lam_max '
                f'(now {self.lam_max}) or a larger cutmix_minmax[0].')
        resized = F.interpolate(
            batch_inputs[index],
            size=(int(y2 - y1), int(x2 - x1)),
            mode=self.interpolation,
            align_corners=False)
        return paste_box(batch_inputs, batch_scores, index, box, lam,
                         resized, self.record_mode)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'lam_min={self.lam_min}, lam_max={self.lam_max}, ' \
               f'interpolation={self.interpolation!r}, ' \
               f'cutmix_minmax={self.cutmix_minmax}, ' \
               f'correct_lam={self.correct_lam})'
