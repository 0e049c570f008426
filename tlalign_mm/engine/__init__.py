"""Training-loop pieces for mmengine runs.

Hooks for any OpenMMLab run (resumable runs, strict loads, compile) are in
the ``tlalign_mm.engine`` registry scope (configs name them with
``_scope_='tlalign_mm.engine'``); the mmpretrain-only pieces
(``LabelDriftHook``, ``MergedParamGroupsConstructor``) are in mmpretrain's
registries.
"""
from .atomic_backend import AtomicLocalBackend, atomic_write
from .checkpoint_files import find_resume_checkpoint, write_last_checkpoint
from .label_drift_hook import LabelDriftHook
from .last_checkpoint_hook import LastCheckpointHook
from .merged_param_groups import (
    MergedParamGroupsConstructor,
    merge_param_groups,
)
from .plain_param_groups import PlainParamGroupsHook
from .registry import HOOKS, SCOPE
from .rng_state import capture_rng, restore_rng
from .safe_resume_hook import SafeResumeHook
from .sampler_position import FastForward, SkipSampler
from .strict_load_hook import (
    CheckpointMismatchError,
    StrictLoadHook,
    check_resumable,
    check_state_dict,
)
from .tool_defaults import add_checkpoint_safety_hooks

__all__ = [
    'HOOKS', 'SCOPE', 'AtomicLocalBackend', 'CheckpointMismatchError',
    'FastForward', 'LabelDriftHook', 'LastCheckpointHook',
    'MergedParamGroupsConstructor', 'PlainParamGroupsHook', 'SafeResumeHook',
    'SkipSampler', 'StrictLoadHook', 'add_checkpoint_safety_hooks',
    'atomic_write', 'capture_rng', 'check_resumable', 'check_state_dict',
    'find_resume_checkpoint', 'merge_param_groups', 'restore_rng',
    'write_last_checkpoint'
]
