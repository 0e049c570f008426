"""Checkpoints: loading, saving, strict checks and exact resume.

* :func:`load`: any scheme, weights only, whatever the environment says,
  checked against the schema of the checkpoints mmengine and our runs
  write;
* :func:`install`: every mmengine load goes through :func:`load`, and
  auto-resume stays inside the work dir (the
  tools call it; a config opts in with
  ``custom_imports=dict(imports=['tlalign_mm',
  'tlalign_mm.checkpoint.install'])``);
* :func:`load_strictly` and :class:`CheckpointMismatchError`: the one
  strict loader;
* the hooks, in the ``tlalign_mm`` registry scope:
  :class:`CheckpointSafetyHook` (every tool run) and
  :class:`LastCheckpointHook` (``configs/_base_/resumable_runtime.py``).

``import tlalign_mm`` changes nothing in torch or mmengine: mmengine's own
``load_checkpoint`` stays mmengine's until :func:`install` runs.
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
from .tool import one_line_errors, run_tool

__all__ = [
    'AtomicLocalBackend', 'CheckpointError', 'CheckpointMismatchError',
    'CheckpointSafetyHook', 'LastCheckpointHook', 'add_checkpoint_hooks',
    'atomic_write', 'find_resume_checkpoint', 'install', 'load',
    'load_strictly', 'one_line_errors', 'parse_config', 'run_tool',
    'state_dict_of'
]
