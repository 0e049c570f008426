"""Registered OpenMMLab adapters around :mod:`tlalign_mm.core`."""
from .align_labels import align_labels
from .tlalign_backbone import TLAlignBackbone
from .tlalign_classifier import TLAlignClassifier
from .traced_forward import TracedOutput, traced_forward

__all__ = [
    'align_labels', 'TLAlignBackbone', 'TLAlignClassifier', 'TracedOutput',
    'traced_forward'
]
