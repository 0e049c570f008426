"""Per-batch random choice of a recording batch augmentation."""
from numbers import Real
from typing import Callable, Optional, Tuple, Union

import numpy as np
import torch
from mmpretrain.models.utils.batch_augments import (
    CutMix,
    Mixup,
    RandomBatchAugment,
    ResizeMix,
)
from mmpretrain.registry import BATCH_AUGMENTS

from tlalign_mm.core.mix_record import MixRecord

from .base import is_real
from .cutmix import TLCutMix
from .mixup import TLMixup
from .resizemix import TLResizeMix
from .token_cutmix import TLTokenCutMix, with_model_patch_size

#: mmpretrain's batch augmentations -> their recording variants, which draw
#: exactly what they draw.
RECORDING_VARIANTS = {
    Mixup: TLMixup,
    CutMix: TLCutMix,
    ResizeMix: TLResizeMix
}


def augment_class(cfg) -> Optional[type]:
    """The class an augment config's ``type`` (a registered name, scoped or
    not, or a class) builds; None for anything else."""
    cls = cfg.get('type') if isinstance(cfg, dict) else None
    return BATCH_AUGMENTS.get(cls) if isinstance(cls, str) else cls


def with_recording_variant(cfg):
    """``cfg`` with an mmpretrain augment's type replaced by its recording
    variant (:data:`RECORDING_VARIANTS`); any other augment as it is."""
    variant = RECORDING_VARIANTS.get(augment_class(cfg))
    return cfg if variant is None else dict(cfg, type=variant)


def record_modes(batch_augments: Optional[dict]) -> list:
    """The ``record_mode`` (``'mixup'``, ``'cutmix'``, ...) of each augment
    a ``batch_augments`` config (``augments``: a config, an instance or a
    list of them; ``probs``) can draw, as it is built (mmpretrain's types as
    their recording variants); ``None`` for one without. Empty without
    augments; an augment of probability 0 is never drawn."""
    augments = (batch_augments or {}).get('augments') or []
    if not isinstance(augments, (list, tuple)):
        augments = [augments]
    probs = (batch_augments or {}).get('probs')
    if isinstance(probs, (list, tuple)) and len(probs) == len(augments):
        augments = [aug for aug, p in zip(augments, probs) if p != 0]
    classes = [augment_class(with_recording_variant(aug))
               if isinstance(aug, dict) else type(aug) for aug in augments]
    return [getattr(cls, 'record_mode', None) for cls in classes]


def _no_record_error(aug) -> TypeError:
    name = type(aug).__name__
    built = f' Give `{name}` as a config, dict(type=\'{name}\', ...), not ' \
        'as a built instance.' if type(aug) in RECORDING_VARIANTS else ''
    return TypeError(
        f'Batch augment `{name}` has no recording variant (a '
        '`mix_with_record` method), which TL-Align needs to know how each '
        'pixel was mixed. Supported: mmpretrain\'s Mixup, CutMix and '
        'ResizeMix (given by name or class, they are built as their '
        'recording variants TLMixup, TLCutMix and TLResizeMix), and '
        f'TLTokenCutMix, TLPatchMix and TLBlockMix from tlalign_mm.mixing.'
        f'{built}')


def _check_probs(probs, count: int) -> list:
    """A copy of ``probs`` (mmpretrain appends to the list it gets), or a
    ValueError that says what is wrong."""
    prefix = 'TLRandomBatchAugment: probs'
    if not isinstance(probs, (list, tuple)) or not all(
            is_real(p) and 0 <= p <= 1 for p in probs):
        raise ValueError(f'{prefix} must be probabilities in [0, 1], one per '
                         f'augment; got {probs!r}')
    if len(probs) != count:
        raise ValueError(f'{prefix} has {len(probs)} value(s) for {count} '
                         f'augment(s); give one each (got {probs!r})')
    if sum(probs) > 1 + 1e-6:
        raise ValueError(f'{prefix} sum to {sum(probs):g} > 1; the rest up '
                         'to 1 is the chance of no mixing (DeiT: [0.5, 0.5] '
                         f'for Mixup and CutMix); got {probs!r}')
    return [float(p) for p in probs]


class TLRandomBatchAugment(RandomBatchAugment):
    """mmpretrain's :class:`RandomBatchAugment` that also returns the record.

    It picks one of ``augments`` per batch with probabilities ``probs`` (the
    rest is "no mixing"; DeiT's switch between Mixup and CutMix) by
    mmpretrain's ``np.random.choice`` draw.
    mmpretrain's own ``Mixup``, ``CutMix`` and ``ResizeMix`` configs (a
    recipe's ``train_cfg``, unchanged) are built as their recording variants
    (:data:`RECORDING_VARIANTS`), which draw exactly what they draw; any
    other augment must have a ``mix_with_record`` method (``TLTokenCutMix``,
    ``TLPatchMix``, ...): a TypeError naming it otherwise.

    Args:
        augments (Callable | dict | list): Configs (or instances) of the
            batch augmentations.
        probs (float | List[float] | None): The probability of each augment
            (each in [0, 1], summing to at most 1). If None, choose evenly
            (never "no mixing"). The list is copied, not extended in place
            as mmpretrain does.
        patch_size (tuple, optional): ``(ph, pw)`` of the model's patches
            (``None``: unknown) and ``model_name`` its name: given them (by
            ``TLAlignClassifier``), ``TLTokenCutMix`` configs are built with
            the model's patch size (:func:`.with_model_patch_size`).
    """

    def __init__(self, augments: Union[Callable, dict, list], probs=None,
                 patch_size: Optional[Tuple[int, int]] = None,
                 model_name: Optional[str] = None):
        if not isinstance(augments, (list, tuple)):
            augments = [augments]
        augments = [with_recording_variant(aug) for aug in augments]
        augments = [
            with_model_patch_size(aug, patch_size, model_name)
            if model_name is not None and _builds_token_cutmix(aug) else aug
            for aug in augments
        ]
        count = len(augments)
        if count == 0:
            raise ValueError('TLRandomBatchAugment: augments is empty; give '
                             'at least one, e.g. [dict(type=\'CutMix\', '
                             'alpha=1.0)], or no batch_augments at all')
        if isinstance(probs, Real) and not isinstance(probs, bool):
            probs = [probs]
        if probs is not None:
            probs = _check_probs(probs, count)
        super().__init__(augments, probs)
        for aug in self.augments:
            if aug is not None and not callable(
                    getattr(aug, 'mix_with_record', None)):
                raise _no_record_error(aug)

    def mix_with_record(
        self, batch_input: torch.Tensor, batch_score: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor, MixRecord]:
        """Randomly apply one batch augmentation and record it (the inputs
        as they are and ``MixRecord.identity`` when none is chosen)."""
        aug = self.augments[np.random.choice(len(self.augments),
                                             p=self.probs)]
        if aug is not None:
            return aug.mix_with_record(batch_input, batch_score)
        B, (H, W) = batch_input.size(0), batch_input.shape[-2:]
        return batch_input, batch_score.float(), MixRecord.identity(
            B, H, W, device=batch_input.device)

    def __call__(self, batch_input: torch.Tensor,
                 batch_score: torch.Tensor):
        """mmpretrain's interface, by :meth:`mix_with_record` (so the inputs
        are not mixed in place, as mmpretrain's ``CutMix`` would)."""
        return self.mix_with_record(batch_input, batch_score)[:2]


def _builds_token_cutmix(cfg) -> bool:
    """Whether ``cfg`` is the config of a :class:`TLTokenCutMix`."""
    cls = augment_class(cfg)
    return isinstance(cls, type) and issubclass(cls, TLTokenCutMix)
