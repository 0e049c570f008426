"""tlalign_mm: Token-Label Alignment (TL-Align) and SPT/LSA for OpenMMLab 2.x.

Importing the package registers its components in the mmpretrain registries
(so configs can name them with
``custom_imports=dict(imports=['tlalign_mm'])``).
"""
from . import checkpoint, datasets, downstream, engine, mixing  # noqa: F401
from .models import TLAlignClassifier, align_labels

__version__ = '0.1.0'
__all__ = ['align_labels', 'TLAlignClassifier']
