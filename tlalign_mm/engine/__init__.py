"""Registered mmengine components: hooks and an optimizer constructor."""
from .label_drift_hook import LabelDriftHook
from .merged_param_groups import (
    MergedParamGroupsConstructor,
    merge_param_groups,
)

__all__ = [
    'LabelDriftHook', 'MergedParamGroupsConstructor', 'merge_param_groups'
]
