"""Checkpoints: :func:`load` (weights only, checked against a schema),
:func:`install` (every mmengine load through it, auto-resume inside the
work dir, resumed optimizer and scheduler states checked against the
optimizer, :mod:`.training_state`), :func:`load_strictly`, atomic writes
and the hooks. ``import tlalign_mm``
changes nothing in torch or mmengine until :func:`install` runs.
"""
from .files import AtomicLocalBackend, atomic_write, find_resume_checkpoint
from .hooks import (
    CheckpointSafetyHook,
    LastCheckpointHook,
    add_checkpoint_hooks,
)
from .load import CheckpointError, load, parse_config
from .mmengine_adapter import install
from .strict import CheckpointMismatchError, load_strictly, state_dict_of
from .tool import one_line_errors

__all__ = [
    'AtomicLocalBackend', 'CheckpointError', 'CheckpointMismatchError',
    'CheckpointSafetyHook', 'LastCheckpointHook', 'add_checkpoint_hooks',
    'atomic_write', 'find_resume_checkpoint', 'install', 'load',
    'load_strictly', 'one_line_errors', 'parse_config',
    'state_dict_of'
]
