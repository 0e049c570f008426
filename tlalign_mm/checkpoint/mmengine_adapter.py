"""Everything of mmengine that safe loading and exact resume reach beyond its
public API, in one place.

:func:`install` (the tools call it; a config run by any launcher opts in
with ``custom_imports=dict(imports=['tlalign_mm',
'tlalign_mm.checkpoint.install'])``) replaces:

* ``CheckpointLoader.load_checkpoint`` (public): every mmengine load
  (``Runner.load_checkpoint`` / ``resume``, ``load_checkpoint``,
  ``init_cfg=dict(type='Pretrained')``, ``BaseInferencer``'s weights)
  goes through :func:`~.load.load`, whatever the scheme;
* ``find_latest_checkpoint``, as ``mmengine.runner``, its ``checkpoint``,
  ``runner`` and ``_flexible_runner`` modules name it: auto-resume
  (``resume=True`` without ``load_from``) takes
  :func:`~.files.find_resume_checkpoint`'s file, inside the work dir.

Exact resume (:class:`~.hooks.LastCheckpointHook`) touches private API,
checked against mmengine 0.10.7 (:func:`exact_resume_supported`; with
another release, a resume is mmengine's own):

* ``Runner._resume``, ``Runner._load_from`` (read): whether and what the
  run resumes.
* ``Runner._randomness_cfg`` (read): ``diff_rank_seed``.
* ``IterBasedTrainLoop.dataloader_iterator`` (replaced) and
  ``mmengine.runner.loops._InfiniteDataloaderIterator`` (built): the loop
  calls ``next()`` ``iter`` times to skip to a resumed iteration.
"""
import itertools

import mmengine
from mmengine.logging import print_log
from mmengine.runner import checkpoint as mmengine_checkpoint

from .files import find_resume_checkpoint
from .load import load

#: the mmengine release exact resume was written for and tested with
MMENGINE_VERSION = '0.10.7'


def _load_checkpoint(cls, filename, map_location=None, logger='current'):
    return load(filename, map_location)


def exact_resume_supported() -> bool:
    """Whether exact resume may restore the resumed file's states: mmengine
    is the release its private API was checked against, and the file was
    read by :func:`~.load.load` (its ``resume_state`` checked). If not, says
    that the resume is mmengine's own."""
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
    """Make the ``calls`` ``next()`` calls with which an
    ``IterBasedTrainLoop`` skips to its resumed iteration free (the
    sampler skips the indices), the later ones the loader's."""
    from mmengine.runner.loops import _InfiniteDataloaderIterator
    loop.dataloader_iterator = itertools.chain(
        itertools.repeat(None, calls), _InfiniteDataloaderIterator(loader))


def install() -> None:
    """Route every checkpoint mmengine loads through
    :func:`tlalign_mm.checkpoint.load`, and auto-resume through
    :func:`~.files.find_resume_checkpoint` (idempotent)."""
    import mmengine.runner._flexible_runner as flexible
    import mmengine.runner.runner as runner
    mmengine_checkpoint.CheckpointLoader.load_checkpoint = classmethod(
        _load_checkpoint)
    for module in (mmengine.runner, mmengine_checkpoint, runner, flexible):
        module.find_latest_checkpoint = find_resume_checkpoint
