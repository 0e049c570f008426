"""Training-loop pieces for mmengine runs.

Hooks for any OpenMMLab run are in the ``tlalign_mm.engine`` registry scope
(configs name them with ``_scope_='tlalign_mm.engine'``): the checkpoint
hooks of :mod:`tlalign_mm.checkpoint` and ``PlainParamGroupsHook``. The
mmpretrain-only pieces (``LabelDriftHook``, ``MergedParamGroupsConstructor``)
are in mmpretrain's registries.
"""
from .label_drift_hook import LabelDriftHook
from .merged_param_groups import (
    MergedParamGroupsConstructor,
    merge_param_groups,
)
from .plain_param_groups import PlainParamGroupsHook
from .registry import HOOKS, SCOPE

__all__ = [
    'HOOKS', 'SCOPE', 'LabelDriftHook', 'MergedParamGroupsConstructor',
    'PlainParamGroupsHook', 'merge_param_groups'
]
