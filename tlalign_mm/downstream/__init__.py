"""Downstream use of TL-Align checkpoints: the strict ``Pretrained``
initializer (``tlalign_mm`` scope), export, and the robustness metrics
``SubsetAccuracy`` and ``CorruptionError`` (mmpretrain's registry)."""
from . import metrics  # noqa: F401  (registration)
from .strict_pretrained import StrictPretrainedInit

__all__ = ['StrictPretrainedInit']
