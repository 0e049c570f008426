"""Registered OpenMMLab adapters around :mod:`tlalign_mm.core`."""
from . import (
    param_init,  # noqa: F401  (registers TruncNormalParams)
    spt_lsa,  # noqa: F401  (registers SPT/LSA, SL-ViT, SL-Swin)
)
from .align_labels import align_labels
from .aligned_forward import AlignedOutput, aligned_forward
from .pooled_timm_backbone import PooledTIMMBackbone
from .pyramid_gap import PyramidGlobalAveragePooling
from .swin_window_resize import install_mmpretrain_resize  # noqa: F401
from .tlalign_backbone import TLAlignBackbone
from .tlalign_classifier import TLAlignClassifier

__all__ = [
    'align_labels', 'AlignedOutput', 'aligned_forward', 'PooledTIMMBackbone',
    'PyramidGlobalAveragePooling', 'TLAlignBackbone', 'TLAlignClassifier'
]
