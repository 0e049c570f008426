"""Training-loop pieces for mmengine runs (hooks in the
``tlalign_mm.engine`` registry scope: configs name them with
``_scope_='tlalign_mm.engine'``)."""
from .atomic_backend import AtomicLocalBackend, atomic_write
from .checkpoint_files import find_resume_checkpoint, write_last_checkpoint
from .last_checkpoint_hook import LastCheckpointHook
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
    'FastForward', 'LastCheckpointHook', 'PlainParamGroupsHook',
    'SafeResumeHook', 'SkipSampler',
    'StrictLoadHook', 'add_checkpoint_safety_hooks', 'atomic_write',
    'capture_rng', 'check_resumable', 'check_state_dict',
    'find_resume_checkpoint', 'restore_rng', 'write_last_checkpoint'
]
