"""Which checkpoint of a work dir to resume from, and how to record it.

mmengine's auto-resume (``resume=True`` without ``load_from``) reads the
path in ``<work_dir>/last_checkpoint`` and resumes from it. That path is
absolute, so a copied or moved work dir resumes from the *original*
directory's file; and when that file is truncated (a kill during a
non-atomic save) or was already deleted (``CheckpointHook`` removes the
oldest checkpoint before writing the next), resuming fails with no fallback
although an intact checkpoint sits beside it.

:func:`find_resume_checkpoint` resolves ``last_checkpoint`` relative to the
work dir it is in, and falls back to the newest intact checkpoint there.
"""
import os
import os.path as osp
from typing import List, Mapping, NamedTuple, Optional

from mmengine.logging import print_log

from tlalign_mm.checkpoint_safety import (
    CheckpointFileError,
    UnsafeCheckpointError,
    load_from_local_weights_only,
)

from .atomic_backend import TEMP_SUFFIX, atomic_write

__all__ = [
    'Candidate', 'checkpoint_candidates', 'find_resume_checkpoint',
    'read_progress', 'write_last_checkpoint'
]

LAST_CHECKPOINT = 'last_checkpoint'


class Candidate(NamedTuple):
    """A checkpoint file and how far its run had got (``None`` if the file
    is not an intact, resumable checkpoint; ``problem`` says why)."""
    path: str
    iter: Optional[int]
    epoch: Optional[int]
    problem: Optional[str]


def has_progress(meta) -> bool:
    """Whether a checkpoint's ``meta`` says where its run was: integer
    ``epoch`` and ``iter``, as a Runner checkpoint's."""
    return isinstance(meta, Mapping) and all(
        isinstance(meta.get(k), int) for k in ('epoch', 'iter'))


def read_progress(path: str) -> Candidate:
    """``meta['iter']``/``meta['epoch']`` of ``path``, read weights-only
    with the tensors memory-mapped (cheap for any size); a file that does
    not load completely is reported, not raised."""
    try:
        ckpt = load_from_local_weights_only(path, 'cpu', mmap=True)
    except (CheckpointFileError, UnsafeCheckpointError, OSError) as error:
        return Candidate(path, None, None, str(error).split('. ')[0])
    meta = ckpt.get('meta') if isinstance(ckpt, dict) else None
    if not has_progress(meta):
        return Candidate(path, None, None, 'no meta iter/epoch (not a '
                         'Runner checkpoint)')
    return Candidate(path, meta['iter'], meta['epoch'], None)


def checkpoint_candidates(work_dir: str) -> List[Candidate]:
    """Every ``*.pth`` directly in ``work_dir`` (temporary files of
    interrupted atomic saves excluded), newest progress first, then the
    broken ones."""
    names = sorted(
        n for n in os.listdir(work_dir) if n.endswith('.pth')
        and not n.startswith('.') and osp.isfile(osp.join(work_dir, n)))
    found = [read_progress(osp.join(work_dir, n)) for n in names]
    intact = [c for c in found if c.problem is None]
    intact.sort(
        key=lambda c: (c.iter, c.epoch, osp.getmtime(c.path)), reverse=True)
    return intact + [c for c in found if c.problem is not None]


def _recorded(work_dir: str) -> Optional[str]:
    """``last_checkpoint``'s path, resolved inside ``work_dir``."""
    record = osp.join(work_dir, LAST_CHECKPOINT)
    if not osp.isfile(record):
        return None
    with open(record) as f:
        recorded = f.read().strip()
    if not recorded:
        return None
    if not osp.isabs(recorded):
        return osp.join(work_dir, recorded)
    here = osp.realpath(work_dir)
    if osp.realpath(recorded).startswith(here + os.sep):
        return recorded
    local = osp.join(work_dir, osp.basename(recorded))
    print_log(
        f'{record} names {recorded}, outside this work dir (a copied or '
        f'moved work dir); resuming from this work dir\'s own {local} '
        'instead', logger='current')
    return local


def find_resume_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint auto-resume should use, or ``None`` to start afresh.

    ``last_checkpoint``'s file (resolved inside ``work_dir``) if it is
    intact, else the intact checkpoint of ``work_dir`` that got furthest.

    Raises:
        CheckpointFileError: checkpoints are there but none is intact
            (starting afresh silently would discard the run).
    """
    if not osp.isdir(work_dir):
        return None
    recorded = _recorded(work_dir)
    if recorded is not None and osp.isfile(recorded):
        candidate = read_progress(recorded)
        if candidate.problem is None:
            return recorded
        print_log(f'{recorded} (named by last_checkpoint) cannot be resumed: '
                  f'{candidate.problem}; looking for the newest intact '
                  'checkpoint', logger='current', level=30)
    elif recorded is not None:
        print_log(f'{recorded} (named by last_checkpoint) does not exist; '
                  'looking for the newest intact checkpoint',
                  logger='current', level=30)
    candidates = checkpoint_candidates(work_dir)
    if not candidates:
        return None
    best = candidates[0]
    if best.problem is None:
        print_log(f'Auto-resume: {best.path} (iter {best.iter}) is the '
                  f'newest intact checkpoint of {work_dir}', logger='current')
        return best.path
    broken = '\n'.join(f'  {c.path}: {c.problem}' for c in candidates)
    raise CheckpointFileError(
        f'--resume found checkpoints in {work_dir} but none is intact:\n'
        f'{broken}\nResume from a copy you trust with --resume PATH, or '
        'move these files away to start afresh.')


def write_last_checkpoint(work_dir: str, checkpoint: str) -> None:
    """Record ``checkpoint`` in ``<work_dir>/last_checkpoint``, relative to
    the work dir when it is inside it, atomically."""
    here = osp.realpath(work_dir)
    target = osp.realpath(checkpoint)
    if target.startswith(here + os.sep):
        checkpoint = osp.relpath(target, here)
    atomic_write(osp.join(work_dir, LAST_CHECKPOINT), checkpoint.encode())


def remove_partial_files(work_dir: str) -> List[str]:
    """Delete the temporary files interrupted atomic saves left behind."""
    removed = []
    if osp.isdir(work_dir):
        for name in os.listdir(work_dir):
            if name.startswith('.') and name.endswith(TEMP_SUFFIX):
                os.remove(osp.join(work_dir, name))
                removed.append(name)
    return removed
