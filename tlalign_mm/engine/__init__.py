"""Training-loop pieces for mmengine runs.

``PlainParamGroupsHook`` (any OpenMMLab run) is in the ``tlalign_mm``
registry scope (:mod:`tlalign_mm.registry`), with the checkpoint hooks of
:mod:`tlalign_mm.checkpoint`; the mmpretrain-only pieces
(``LabelDriftHook``, ``MergedParamGroupsConstructor``) are in mmpretrain's
registries.
"""
from .label_drift_hook import LabelDriftHook
from .merged_param_groups import (
    MergedParamGroupsConstructor,
    merge_param_groups,
)
from .plain_param_groups import PlainParamGroupsHook

__all__ = [
    'LabelDriftHook', 'MergedParamGroupsConstructor', 'PlainParamGroupsHook',
    'merge_param_groups'
]
