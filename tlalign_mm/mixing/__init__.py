"""Batch augmentations that record how they mix, for TL-Align, registered
in mmpretrain's ``BATCH_AUGMENTS``, and ``TLAlignDataPreprocessor`` in its
``MODELS``."""
from .base import BaseCellMix
from .block_mix import TLBlockMix
from .cutmix import TLCutMix
from .data_preprocessor import TLAlignDataPreprocessor
from .mixup import TLMixup
from .patch_mix import TLPatchMix
from .resizemix import TLResizeMix
from .token_cutmix import TLTokenCutMix
from .wrapper import TLRandomBatchAugment

__all__ = [
    'BaseCellMix', 'TLAlignDataPreprocessor', 'TLBlockMix', 'TLCutMix',
    'TLMixup', 'TLPatchMix', 'TLRandomBatchAugment', 'TLResizeMix',
    'TLTokenCutMix'
]
