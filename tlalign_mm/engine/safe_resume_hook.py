"""Checkpoint writes that a kill cannot truncate, and an auto-resume that
finds the right file. ``tools/train.py`` adds this hook to every run."""
from mmengine.dist import is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log

from .checkpoint_files import find_resume_checkpoint, remove_partial_files
from .registry import HOOKS

__all__ = ['SafeResumeHook']


def _is_local(path) -> bool:
    return path is None or '://' not in str(path)


@HOOKS.register_module()
class SafeResumeHook(Hook):
    """Atomic checkpoint writes and a robust auto-resume.

    In ``before_run`` (before mmengine loads or resumes anything):

    * every ``CheckpointHook`` saving to a local directory without
      ``backend_args`` gets ``backend_args=dict(backend='atomic_local')``
      (:class:`~tlalign_mm.engine.atomic_backend.AtomicLocalBackend`): its
      checkpoints are written to a temporary file and renamed, so a kill
      during a save never leaves a truncated file under the final name;
    * temporary files of saves a kill interrupted are removed;
    * with auto-resume (``--resume`` without a path), the checkpoint is
      chosen by :func:`~tlalign_mm.engine.checkpoint_files.
      find_resume_checkpoint`: ``last_checkpoint`` resolved inside this work
      dir (a copied work dir resumes from its own files), falling back to
      the newest intact checkpoint, with an error if none is intact.

    It changes nothing that is computed: a run with it trains exactly as
    without it.
    """

    priority = 'VERY_HIGH'

    def before_run(self, runner) -> None:
        for hook in runner.hooks:
            if (isinstance(hook, CheckpointHook) and hook.backend_args is None
                    and hook.file_client_args is None
                    and _is_local(hook.out_dir)):
                hook.backend_args = dict(backend='atomic_local')
        if is_main_process():
            removed = remove_partial_files(runner.work_dir)
            if removed:
                print_log(f'Removed {len(removed)} partial file(s) of '
                          f'interrupted saves: {removed}', logger='current')
        # ``Runner.load_or_resume`` (called after before_run) auto-resumes
        # when ``_resume`` is set and ``_load_from`` is not; giving it the
        # path makes it resume from that file instead.
        if runner._resume and runner._load_from is None:
            path = find_resume_checkpoint(runner.work_dir)
            if path is not None:
                runner._load_from = path
