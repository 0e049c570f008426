"""Registered OpenMMLab adapters around :mod:`tlalign_mm.core`."""
from . import (
    param_init,  # noqa: F401  (registers TruncNormalParams)
    spt_lsa,  # noqa: F401  (registers SPT/LSA, SL-ViT, SL-Swin)
)
from .align import align_labels
from .pooled_timm_backbone import PooledTIMMBackbone
from .pyramid_gap import PyramidGlobalAveragePooling
from .swin_window_resize import install_mmpretrain_resize  # noqa: F401
from .tlalign_backbone import TLAlignBackbone
from .tlalign_classifier import TLAlignClassifier
from .traced_forward import TracedOutput, traced_forward

__all__ = [
    'align_labels', 'PooledTIMMBackbone', 'PyramidGlobalAveragePooling',
    'TLAlignBackbone', 'TLAlignClassifier', 'TracedOutput', 'traced_forward'
]
