"""Downstream use of TL-Align checkpoints: strict backbone loading, export,
and the datasets and metrics of the transfer and robustness evaluations.

Importing this package registers (configs do it with
``custom_imports=dict(imports=['mmpretrain.models', 'tlalign_mm',
'tlalign_mm.downstream'])``):

* the strict ``Pretrained`` weight initializer of the
  ``tlalign_mm.downstream`` scope (:mod:`.strict_pretrained`);
* mmpretrain datasets ``LocalCIFAR10``, ``LocalCIFAR100``,
  ``ImageNetA``, ``ImageNetR``, ``ImageNetV2`` and ``ImageNetC``
  (:mod:`.datasets`);
* mmpretrain metrics ``SubsetAccuracy`` and ``CorruptionError`` (mCE)
  (:mod:`.metrics`).
"""
from . import datasets, metrics  # noqa: F401  (registration)
from .strict_pretrained import (
                                SCOPE,
                                BackboneLoadError,
                                StrictPretrainedInit,
                                load_backbone_state_dict,
                                load_strict,
                                strict_pretrained_cfg,
)

__all__ = [
    'SCOPE', 'BackboneLoadError', 'StrictPretrainedInit',
    'load_backbone_state_dict', 'load_strict', 'strict_pretrained_cfg'
]
