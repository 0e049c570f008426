"""ResizeMix that records how it mixed."""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import ResizeMix
from mmpretrain.registry import BATCH_AUGMENTS

from tlalign_mm.core.mix_record import MixRecord

from .base import (
    check_alpha,
    check_cutmix_box,
    draw_mix,
    is_real,
    paste_box,
)

# The modes F.interpolate accepts for a 4-D batch with align_corners=False,
# which ResizeMix.mix passes (mmpretrain's docstring also lists 'nearest',
# 'linear', 'trilinear' and 'area': each raises inside its mix).
INTERPOLATIONS = ('bilinear', 'bicubic')


def _check_lam_range(lam_min, lam_max, owner: str) -> Tuple[float, float]:
    """``(lam_min, lam_max)`` as floats with ``0 <= lam_min <= lam_max < 1``,
    or a ValueError saying what they mean."""
    if not (is_real(lam_min) and is_real(lam_max)) or \
            not 0 <= lam_min <= lam_max < 1:
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
    mmpretrain's. :meth:`mix_with_record` draws what ``ResizeMix.mix`` draws,
    in its order (``np.random.beta``, ``torch.randperm``, CutMix's box), and
    resizes with the same ``F.interpolate`` call, so from the same RNG state
    it gives exactly mmpretrain's mixed inputs and scores.

    Lambda (mmpretrain ``resizemix.py:81-87``): ``lam = Beta(alpha, alpha) *
    (lam_max - lam_min) + lam_min`` (the class docstring's formula divides;
    the code multiplies), the box side ``sqrt(1 - lam)`` of the image side,
    corrected as :class:`TLCutMix`'s. The box's pixels are all the partner's
    (labels count each source's share of the *mixed* image, not of its own
    image, which the box holds whole), so the record is CutMix's.

    Args:
        alpha (float): Parameter of the Beta distribution.
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
            alpha=check_alpha(alpha, owner), lam_min=lam_min,
            lam_max=lam_max, interpolation=interpolation,
            cutmix_minmax=cutmix_minmax, correct_lam=correct_lam)

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix like :meth:`ResizeMix.mix` (not in place) and record how;
        a ValueError where the drawn box is empty (mmpretrain's
        ``F.interpolate`` call fails there)."""
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
            batch_inputs[index], size=(int(y2 - y1), int(x2 - x1)),
            mode=self.interpolation, align_corners=False)
        return paste_box(batch_inputs, batch_scores, index, box, lam,
                         resized, self.record_mode)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(alpha={self.alpha}, ' \
               f'lam_min={self.lam_min}, lam_max={self.lam_max}, ' \
               f'interpolation={self.interpolation!r}, ' \
               f'cutmix_minmax={self.cutmix_minmax}, ' \
               f'correct_lam={self.correct_lam})'
