"""Batch augmentations that record how they mix, for TL-Align.

Importing this package registers ``TLCutMix``, ``TLTokenCutMix``,
``TLMixup``, ``TLResizeMix``, ``TLPatchMix`` and ``TLBlockMix`` in
mmpretrain's ``BATCH_AUGMENTS`` and ``TLAlignDataPreprocessor`` in
mmpretrain's ``MODELS`` (configs:
``custom_imports = dict(imports=['tlalign_mm.mixing'])``).
"""
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
