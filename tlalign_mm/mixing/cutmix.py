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

    ``__call__`` and ``mix`` are mmpretrain's. :meth:`mix_with_record`
    draws what ``CutMix.mix`` draws, in its order (``np.random.beta``,
    ``torch.randperm``, the ``np.random.randint`` calls of ``rand_bbox`` /
    ``rand_bbox_minmax``), so from the same RNG state it gives exactly
    mmpretrain's mixed inputs and scores. The box is pixel exact: a token it
    cuts through gets a fractional label. ``area_share`` is ``(lam, 1 -
    lam)`` with mmpretrain's lambda (the clipped box's with ``correct_lam``
    or ``cutmix_minmax``; otherwise the drawn one, as in the scores).

    Args:
        alpha (float), cutmix_minmax (List[float], optional), correct_lam
            (bool): as :class:`CutMix` (defaults None, True).
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
        super().__init__(alpha=check_alpha(alpha, owner),
                         cutmix_minmax=cutmix_minmax, correct_lam=correct_lam)

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix like :meth:`CutMix.mix` (not in place) and record how."""
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        box, lam = self.cutmix_bbox_and_lam(batch_inputs.shape[-2:], lam)
        y1, y2, x1, x2 = box
        return paste_box(batch_inputs, batch_scores, index, box, lam,
                         batch_inputs[index, :, y1:y2, x1:x2],
                         self.record_mode)
