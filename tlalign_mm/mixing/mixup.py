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

    ``__call__`` and ``mix`` are mmpretrain's, unchanged.
    :meth:`mix_with_record` draws the same random numbers in the same order as
    ``mmpretrain.models.Mixup.mix`` (``np.random.beta`` then
    ``torch.randperm``), so given the same numpy and torch RNG state it gives
    exactly mmpretrain's mixed inputs and scores.

    The record has two sources: every pixel has weight ``lam`` for source 0
    and ``1 - lam`` for source 1 (``source_index[:, 1]`` is the permutation
    ``index``); ``area_share`` is ``(lam, 1 - lam)``.

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
        """Mix the batch like :meth:`Mixup.mix` and record how.

        Args:
            batch_inputs (Tensor): ``(N, C, H, W)`` images (any dtype).
            batch_scores (Tensor): ``(N, num_classes)`` one-hot format labels.

        Returns:
            Tuple[Tensor, Tensor, MixRecord]: The mixed float inputs
            ``(N, C, H, W)``, the mixed float scores ``(N, num_classes)`` and
            the record (two sources).
        """
        # Same draws, same order, same arithmetic as mmpretrain's Mixup.mix.
        batch_scores, lam, index = draw_mix(self.alpha, batch_inputs,
                                            batch_scores)
        batch_size = batch_inputs.size(0)
        mixed_inputs = mix_pairs(batch_inputs, index, lam)
        mixed_scores = mix_pairs(batch_scores, index, lam)

        img_h, img_w = batch_inputs.shape[-2:]
        pixel_weights = torch.empty(
            batch_size,
            2,
            img_h,
            img_w,
            dtype=torch.float32,
            device=batch_inputs.device)
        pixel_weights[:, 0] = lam
        pixel_weights[:, 1] = 1 - lam
        record = two_source_record(pixel_weights, index, lam, self.record_mode)
        return mixed_inputs, mixed_scores, record
