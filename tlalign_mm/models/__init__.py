"""Registered OpenMMLab adapters around :mod:`tlalign_mm.core`."""
from . import (
    param_init,  # noqa: F401  (registers TruncNormalParams)
    spt_lsa,  # noqa: F401  (registers SPT/LSA, SL-ViT, SL-Swin)
    tlalign_backbone,  # noqa: F401  (the removed name's clear error)
)
from .align_labels import align_labels
from .aligned_forward import AlignedOutput, aligned_forward
from .families import Description, Tap, describe
from .pooled_timm_backbone import PooledTIMMBackbone
from .pyramid_gap import PyramidGlobalAveragePooling
from .swin_window_resize import install_mmpretrain_resize  # noqa: F401
from .taps import Recording
from .tlalign_classifier import TLAlignClassifier

__all__ = [
    'align_labels', 'AlignedOutput', 'aligned_forward', 'Description',
    'describe', 'PooledTIMMBackbone', 'PyramidGlobalAveragePooling',
    'Recording', 'Tap', 'TLAlignClassifier'
]
