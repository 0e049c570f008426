"""Training-loop pieces: ``PlainParamGroupsHook`` (``tlalign_mm`` scope,
any OpenMMLab run); ``LabelDriftHook`` and ``MergedParamGroupsConstructor``
(mmpretrain's registries)."""
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
