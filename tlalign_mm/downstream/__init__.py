"""Downstream use of TL-Align checkpoints: strict backbone loading, export,
and the metrics of the robustness evaluations (their datasets are in
:mod:`tlalign_mm.datasets`).

``import tlalign_mm`` registers the strict ``Pretrained`` weight
initializer of the ``tlalign_mm`` scope (:mod:`.strict_pretrained`) and the
mmpretrain metrics ``SubsetAccuracy`` and ``CorruptionError`` (mCE)
(:mod:`.metrics`).
"""
from . import metrics  # noqa: F401  (registration)
from .strict_pretrained import StrictPretrainedInit

__all__ = ['StrictPretrainedInit']
