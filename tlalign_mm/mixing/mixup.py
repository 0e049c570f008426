"""Mixup that records how it mixed."""
from typing import Tuple

import torch
from mmpretrain.models.utils.batch_augments import Mixup
from mmpretrain.registry import BATCH_AUGMENTS

from tlalign_mm.core.mix_record import MixRecord

from .base import check_alpha, draw_mix, mix_pairs, two_source_record


@BATCH_AUGMENTS.register_module()
class TLMixup(Mixup):
    """mmpretrain's :class:`Mixup`, plus a record of the mix for TL-Align.

    ``__call__`` and ``mix`` are mmpretrain's. :meth:`mix_with_record`
    draws what ``Mixup.mix`` draws, in its order (``np.random.beta``, then
    ``torch.randperm``), so from the same RNG state it gives exactly
    mmpretrain's mixed inputs and scores. Every pixel has weight ``lam``
    for source 0 and ``1 - lam`` for source 1.

    Args:
        alpha (float): Parameter of the Beta distribution, see :class:`Mixup`.
    """

    #: Name written to :attr:`MixRecord.mode`.
    record_mode = 'mixup'

    def __init__(self, alpha: float):
        super().__init__(alpha=check_alpha(alpha, type(self).__name__))

    def mix_with_record(
        self, batch_inputs: torch.Tensor, batch_scores: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Mix like :meth:`Mixup.mix` and record how."""
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        (B, _, H, W), device = batch_inputs.shape, batch_inputs.device
        pixel_weights = torch.empty(B, 2, H, W, dtype=torch.float32,
                                    device=device)
        pixel_weights[:, 0] = lam
        pixel_weights[:, 1] = 1 - lam
        return (mix_pairs(batch_inputs, index, lam),
                mix_pairs(batch_scores, index, lam),
                two_source_record(pixel_weights, index, lam, self.record_mode))
