"""CutMix that records how it mixed."""
from typing import List, Optional, Tuple

import torch
from mmpretrain.models.utils.batch_augments import CutMix
from mmpretrain.registry import BATCH_AUGMENTS

from tlalign_mm.core.mix_record import MixRecord

from .base import check_alpha, check_cutmix_box, draw_mix, paste_box


@BATCH_AUGMENTS.register_module()
class TLCutMix(CutMix):
    """mmpretrain's :class:`CutMix`, plus a record of the mix for TL-Align.

    ``__call__`` and ``mix`` are mmpretrain's, unchanged.
    :meth:`mix_with_record` draws the same random numbers in the same order as
    ``mmpretrain.models.CutMix.mix`` (``np.random.beta``, ``torch.randperm``,
    then the ``np.random.randint`` calls of ``rand_bbox`` /
    ``rand_bbox_minmax``), so given the same numpy and torch RNG state it gives
    exactly mmpretrain's mixed inputs and scores.

    The box is pixel exact: it may cut through ViT patches, so a token can
    hold pixels of both sources (TL-Align then gives it a fractional label).

    The record has two sources: ``pixel_weights[:, 0]`` is 1 outside the box
    and ``pixel_weights[:, 1]`` is 1 inside it; ``source_index[:, 1]`` is the
    permutation ``index``; ``area_share`` is ``(lam, 1 - lam)`` with
    mmpretrain's lambda (corrected to the clipped box when ``correct_lam`` or
    ``cutmix_minmax`` is set; otherwise it is the sampled lambda and differs
    from the box area, exactly as the mixed scores do).

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`CutMix`.
        cutmix_minmax (List[float], optional): Min/max box side ratio, see
            :class:`CutMix`. Defaults to None.
        correct_lam (bool): Whether to correct lambda to the clipped box area,
            see :class:`CutMix`. Defaults to True.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'cutmix'

    def __init__(self,
                 alpha: float,
                 cutmix_minmax: Optional[List[float]] = None,
                 correct_lam: bool = True):
        owner = type(self).__name__
        cutmix_minmax, correct_lam = check_cutmix_box(cutmix_minmax,
                                                      correct_lam, owner)
        super().__init__(
            alpha=check_alpha(alpha, owner),
            cutmix_minmax=cutmix_minmax,
            correct_lam=correct_lam)

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix the batch like :meth:`CutMix.mix` (the inputs, of any dtype,
        not in place) and record how (two sources): ``(mixed inputs, mixed
        float scores, record)``, the protocol of :mod:`~.base`."""
        # Same draws, same order as mmpretrain's CutMix.mix.
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        box, lam = self.cutmix_bbox_and_lam(batch_inputs.shape[-2:], lam)
        y1, y2, x1, x2 = box
        return paste_box(batch_inputs, batch_scores, index, box, lam,
                         batch_inputs[index, :, y1:y2, x1:x2],
                         self.record_mode)

