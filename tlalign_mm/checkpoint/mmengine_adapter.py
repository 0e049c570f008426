"""Everything of mmengine that exact resume and safe loading reach beyond
its public API, in one place, checked against the version it was written
for.

What is touched (mmengine 0.10.7):

* ``Runner._resume``, ``Runner._load_from`` (read; ``_load_from`` set in
  ``before_run`` to pick the auto-resume file): whether and what the run
  resumes; ``Runner.load_or_resume`` runs after ``before_run``.
* ``Runner._randomness_cfg`` (read): ``diff_rank_seed``.
* ``IterBasedTrainLoop.dataloader_iterator`` (replaced) and
  ``mmengine.runner.loops._InfiniteDataloaderIterator`` (built): the loop
  calls ``next()`` ``iter`` times to skip to a resumed iteration.
* ``CheckpointLoader.load_checkpoint`` (public, replaced by
  :func:`install`): every mmengine load (``Runner.load_checkpoint``,
  ``load_checkpoint``, ``init_cfg=dict(type='Pretrained')``) goes through
  it, whatever the scheme.
"""
import itertools

import mmengine
from mmengine.runner import checkpoint as mmengine_checkpoint
from mmengine.runner.loops import _InfiniteDataloaderIterator

from .load import load

#: the mmengine release this module was written for and tested with
MMENGINE_VERSION = '0.10.7'


def check_version(version: str = None) -> None:
    """Raise unless mmengine is the release this module was checked
    against: another one may have renamed what it touches, and exact
    resume would break silently."""
    version = mmengine.__version__ if version is None else version
    if version != MMENGINE_VERSION:
        raise RuntimeError(
            f'tlalign_mm.checkpoint was written for mmengine '
            f'{MMENGINE_VERSION}, this is mmengine {version}: check what '
            'tlalign_mm/checkpoint/mmengine_adapter.py lists against it, '
            f'or install mmengine=={MMENGINE_VERSION}.')


def resuming(runner) -> bool:
    return bool(runner._resume)


def loads_from(runner):
    """The checkpoint the runner loads or resumes from (``None``: auto)."""
    return runner._load_from


def set_auto_resume_file(runner, path: str) -> None:
    """Make ``load_or_resume`` resume from ``path`` (call in before_run)."""
    runner._load_from = path


def diff_rank_seed(runner) -> bool:
    return bool(runner._randomness_cfg.get('diff_rank_seed', False))


def skip_iterations(loop, loader, calls: int) -> None:
    """Make the ``calls`` ``next()`` calls with which an
    ``IterBasedTrainLoop`` skips to its resumed iteration free (the
    sampler skips the indices), the later ones the loader's."""
    loop.dataloader_iterator = itertools.chain(
        itertools.repeat(None, calls), _InfiniteDataloaderIterator(loader))


def _load_checkpoint(cls, filename, map_location=None, logger='current'):
    return load(filename, map_location)


def install() -> None:
    """Route every checkpoint mmengine loads through
    :func:`tlalign_mm.checkpoint.load` (idempotent)."""
    check_version()
    mmengine_checkpoint.CheckpointLoader.load_checkpoint = classmethod(
        _load_checkpoint)
