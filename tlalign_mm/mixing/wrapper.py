"""Per-batch random choice of a recording batch augmentation."""
from typing import Callable, Optional, Tuple, Union

import numpy as np
import torch
from mmpretrain.models.utils.batch_augments import RandomBatchAugment

from tlalign_mm.core.mix_record import MixRecord

# mmpretrain augmentation -> its recording variant in this package.
_TL_VARIANTS = {'CutMix': 'TLCutMix', 'Mixup': 'TLMixup'}


class TLRandomBatchAugment(RandomBatchAugment):
    """mmpretrain's :class:`RandomBatchAugment` that also returns the record.

    It picks one of ``augments`` per batch with probabilities ``probs`` (the
    remaining probability is "no mixing"), e.g. DeiT's per-batch switch
    between Mixup and CutMix, with the same ``np.random.choice`` draw as
    mmpretrain. Every augment must be a recording one (``TLCutMix``,
    ``TLMixup``, ... with a ``mix_with_record`` method).

    Args:
        augments (Callable | dict | list): Configs (or instances) of the
            recording batch augmentations.
        probs (float | List[float] | None): The probability of each augment.
            If None, choose evenly (never "no mixing"). The list is copied,
            not extended in place as mmpretrain does.

    Raises:
        TypeError: If an augment has no ``mix_with_record``.
    """

    def __init__(self, augments: Union[Callable, dict, list], probs=None):
        if isinstance(probs, (list, tuple)):
            probs = list(probs)  # mmpretrain appends to it
        super().__init__(augments, probs)
        for aug in self.augments:
            if aug is not None and not callable(
                    getattr(aug, 'mix_with_record', None)):
                name = type(aug).__name__
                hint = f'use `{_TL_VARIANTS[name]}` instead of `{name}`' \
                    if name in _TL_VARIANTS else \
                    'use a recording variant (`TLCutMix`, `TLMixup`, ' \
                    '`TLTokenCutMix`, `TLPatchMix`, `TLBlockMix`)'
                raise TypeError(
                    f'Batch augment `{name}` cannot record how it mixes (it '
                    f'has no `mix_with_record`), which TL-Align needs: '
                    f'{hint} from `tlalign_mm.mixing`.')

    def mix_with_record(
        self, batch_input: torch.Tensor, batch_score: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Randomly apply one batch augmentation and record it.

        Args:
            batch_input (Tensor): ``(N, C, H, W)`` images.
            batch_score (Tensor): ``(N, num_classes)`` one-hot format labels.

        Returns:
            Tuple[Tensor, Tensor, MixRecord]: The (mixed) inputs, the (mixed)
            float scores and the record; when no augment is chosen the inputs
            are returned as they are with ``MixRecord.identity``.
        """
        aug_index = np.random.choice(len(self.augments), p=self.probs)
        aug = self.augments[aug_index]

        if aug is not None:
            return aug.mix_with_record(batch_input, batch_score)
        batch_size, img_h, img_w = (batch_input.size(0),
                                    *batch_input.shape[-2:])
        record = MixRecord.identity(
            batch_size, img_h, img_w, device=batch_input.device)
        return batch_input, batch_score.float(), record

    def __call__(self, batch_input: torch.Tensor,
                 batch_score: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        """mmpretrain's interface: the (mixed) inputs and scores. The record
        of the call waits in :meth:`take_record` (``ClsDataPreprocessor``
        calls this, and ``TLAlignDataPreprocessor`` takes the record right
        after)."""
        inputs, scores, record = self.mix_with_record(batch_input,
                                                      batch_score)
        self._last = (record, batch_score)
        return inputs, scores

    def take_record(self) -> Optional[Tuple[MixRecord, torch.Tensor]]:
        """The record of the last call and the unmixed ``(N, num_classes)``
        scores it mixed, handed over once; ``None`` if there is none."""
        last, self._last = getattr(self, '_last', None), None
        return last
