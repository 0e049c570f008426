"""How a mixed batch was made: the record every TL-Align step starts from."""
from dataclasses import dataclass, replace
from typing import Optional

import torch


@dataclass
class MixRecord:
    """Per-pixel provenance of a mixed batch of ``S`` sources.

    Attributes:
        pixel_weights (Tensor): ``(B, S, H, W)`` float32. Each pixel's share of
            each source; non-negative and summing to 1 over ``S``.
        source_index (Tensor): ``(B, S)`` long. Source ``s`` of mixed sample
            ``b`` is batch element ``source_index[b, s]`` of the batch before
            mixing. Column 0 is ``arange(B)``; for two-source mixes column 1 is
            mmpretrain's permutation ``index``.
        area_share (Tensor): ``(B, S)`` float32. Each source's area share,
            the (corrected) lambda of the mixed target; the extra tokens'
            initial label.
        mode (str): the augmentation's class name without ``TL``, lower
            case (``'cutmix'``, ``'mixup'``, ...), or ``'none'``.
        targets (Tensor, optional): ``(B, S, C)`` each source's unmixed
            score (:meth:`with_targets`). A mixed sample's training target
            is ``weights @ targets``: ``area_share`` for CutMix, the aligned
            weights for TL-Align.
    """

    pixel_weights: torch.Tensor
    source_index: torch.Tensor
    area_share: torch.Tensor
    mode: str = 'none'
    targets: Optional[torch.Tensor] = None

    @property
    def num_sources(self) -> int:
        return self.pixel_weights.shape[1]

    @classmethod
    def identity(cls, batch_size: int, height: int, width: int,
                 device=None) -> 'MixRecord':
        """The record of an unmixed batch: one source, every pixel its own."""
        return cls(
            pixel_weights=torch.ones(batch_size, 1, height, width,
                                     device=device),
            source_index=torch.arange(batch_size, device=device)[:, None],
            area_share=torch.ones(batch_size, 1, device=device),
            mode='none')

    def with_targets(self, scores: torch.Tensor) -> 'MixRecord':
        """This record with :meth:`source_targets` as ``targets``."""
        return replace(self, targets=self.source_targets(scores))

    def source_targets(self, scores: torch.Tensor) -> torch.Tensor:
        """Each source's label distribution, ``(B, S, C)``, gathered from the
        unmixed batch scores ``(B, C)``."""
        return scores[self.source_index]
