"""tlalign_mm: Token-Label Alignment (TL-Align) and SPT/LSA for OpenMMLab 2.x.

Importing the package registers its components in the mmpretrain registries
(so configs can name them with ``custom_imports=dict(imports=['tlalign_mm'])``).
"""
from .checkpoint_safety import allow_openmmlab_checkpoints; allow_openmmlab_checkpoints()
from . import datasets, mixing  # noqa: F401  (registration)
from .models import TLAlignBackbone, TLAlignClassifier, align_labels

__version__ = '0.1.0'
__all__ = ['align_labels', 'TLAlignBackbone', 'TLAlignClassifier']
