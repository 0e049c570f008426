"""Downstream use of TL-Align checkpoints: strict backbone loading, export,
and the metrics of the robustness evaluations (their datasets are in
:mod:`tlalign_mm.datasets`).

Importing this package registers (configs do it with
``custom_imports=dict(imports=['mmpretrain.models', 'tlalign_mm',
'tlalign_mm.downstream'])``):

* the strict ``Pretrained`` weight initializer of the
  ``tlalign_mm.downstream`` scope (:mod:`.strict_pretrained`);
* mmpretrain metrics ``SubsetAccuracy`` and ``CorruptionError`` (mCE)
  (:mod:`.metrics`).
"""
from . import metrics  # noqa: F401  (registration)
from .strict_pretrained import (
    SCOPE,
    StrictPretrainedInit,
    strict_pretrained_cfg,
)

__all__ = ['SCOPE', 'StrictPretrainedInit', 'strict_pretrained_cfg']
