"""What safe loading and exact resume reach of mmengine, in one place.

:func:`install` replaces ``CheckpointLoader.load_checkpoint`` (every
mmengine load: ``Runner.load_checkpoint`` / ``resume``,
``load_checkpoint``, ``init_cfg=dict(type='Pretrained')``,
``BaseInferencer``'s weights, goes through :func:`~.load.load`) and
``find_latest_checkpoint`` wherever mmengine's modules name it
(auto-resume stays inside the work dir).

It also wraps ``load_state_dict`` of mmengine's optimizer wrappers and
schedulers: a resumed state is checked against the optimizer that loads
it (:mod:`.training_state`).

Exact resume reads ``Runner._resume``, ``_load_from`` and
``_randomness_cfg``, and replaces ``IterBasedTrainLoop.dataloader_iterator``
(private API of mmengine 0.10.7: with another release, a resume is
mmengine's own, :func:`exact_resume_supported`).
"""
import itertools

import mmengine
from mmengine.logging import print_log
from mmengine.runner import checkpoint as mmengine_checkpoint

from . import training_state
from .files import find_resume_checkpoint
from .load import load

#: the mmengine release exact resume was written for and tested with
MMENGINE_VERSION = '0.10.7'


def _load_checkpoint(cls, filename, map_location=None, logger='current'):
    return load(filename, map_location)


def exact_resume_supported() -> bool:
    """Whether mmengine is the release exact resume was checked against and
    the file was read by :func:`~.load.load`; if not, says so."""
    ours = getattr(mmengine_checkpoint.CheckpointLoader.load_checkpoint,
                   '__func__', None) is _load_checkpoint
    why = f'mmengine {mmengine.__version__}, not {MMENGINE_VERSION}' if \
        mmengine.__version__ != MMENGINE_VERSION else None if ours else \
        'the file was read without tlalign_mm.checkpoint.install()'
    if why:
        print_log(f"Exact resume is off ({why}): the resume is mmengine's "
                  'own; the sampler position and random draws are not '
                  'restored.', logger='current', level=30)
    return why is None


def resuming(runner) -> bool:
    return bool(runner._resume)


def loads_from(runner):
    """The checkpoint the runner loads or resumes from (``None``: auto)."""
    return runner._load_from


def diff_rank_seed(runner) -> bool:
    return bool(runner._randomness_cfg.get('diff_rank_seed', False))


def skip_iterations(loop, loader, calls: int) -> None:
    """The ``calls`` ``next()`` calls an ``IterBasedTrainLoop`` makes to
    reach its resumed iteration cost nothing (the sampler skips)."""
    from mmengine.runner.loops import _InfiniteDataloaderIterator
    loop.dataloader_iterator = itertools.chain(
        itertools.repeat(None, calls), _InfiniteDataloaderIterator(loader))


def _checked(load, check):
    """``load`` (a ``load_state_dict`` method) taking ``check(self,
    state)`` of the state it is given."""
    def load_state_dict(self, state_dict):
        return load(self, check(self, state_dict))
    load_state_dict.checked = load
    return load_state_dict


def install() -> None:
    """Route every checkpoint mmengine loads through
    :func:`tlalign_mm.checkpoint.load`, auto-resume through
    :func:`~.files.find_resume_checkpoint`, and every resumed optimizer and
    scheduler state through :mod:`.training_state` (idempotent)."""
    import mmengine.runner._flexible_runner as flexible
    import mmengine.runner.runner as runner
    from mmengine.optim import AmpOptimWrapper, BaseOptimWrapper
    from mmengine.optim.scheduler.param_scheduler import _ParamScheduler
    mmengine_checkpoint.CheckpointLoader.load_checkpoint = classmethod(
        _load_checkpoint)
    for module in (mmengine.runner, mmengine_checkpoint, runner, flexible):
        module.find_latest_checkpoint = find_resume_checkpoint
    for cls, check in ((BaseOptimWrapper, training_state.optimizer_state),
                       (AmpOptimWrapper, training_state.optimizer_state),
                       (_ParamScheduler, training_state.scheduler_state)):
        load_state_dict = cls.__dict__['load_state_dict']
        if not hasattr(load_state_dict, 'checked'):
            cls.load_state_dict = _checked(load_state_dict, check)
