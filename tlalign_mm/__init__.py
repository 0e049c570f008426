"""tlalign_mm: Token-Label Alignment (TL-Align) and SPT/LSA for OpenMMLab 2.x.

Importing the package registers its components in the mmpretrain registries
(so configs can name them with
``custom_imports=dict(imports=['tlalign_mm'])``).
"""
from . import datasets, downstream, engine, mixing  # noqa: F401  (registration)
from .checkpoint_safety import allow_openmmlab_checkpoints
from .models import TLAlignBackbone, TLAlignClassifier, align_labels

__version__ = '0.1.0'

# torch >= 2.6 loads with weights_only=True; let it read what mmengine saves.
allow_openmmlab_checkpoints()
__all__ = ['align_labels', 'TLAlignBackbone', 'TLAlignClassifier']
