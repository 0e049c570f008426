"""Checkpoint files in a work dir: atomic writes, ``last_checkpoint``, and
which file an auto-resume picks.

mmengine's ``LocalBackend.put`` writes into the final path, so a kill
during a save leaves a truncated file that ``last_checkpoint`` names; and
``last_checkpoint`` holds an absolute path, so a copied work dir resumes
from the original's files. Here writes go to a temporary file that is
renamed (``os.replace`` is atomic on POSIX), ``last_checkpoint`` is read
inside the work dir only, and auto-resume falls back to the newest intact
checkpoint of the work dir.
"""
import os
import os.path as osp
import uuid
from pathlib import Path
from typing import List, NamedTuple, Optional, Union

from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import print_log

from .load import CheckpointError, load

__all__ = ['AtomicLocalBackend', 'atomic_write', 'find_resume_checkpoint',
           'inside', 'remove_partial_files', 'write_last_checkpoint']

TEMP_SUFFIX = '.partial'
LAST_CHECKPOINT = 'last_checkpoint'


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` resolves (symlinks and ``..`` included) to a
    location inside ``folder``."""
    return osp.realpath(path).startswith(osp.realpath(folder) + os.sep)


def atomic_write(path: Union[str, Path], data: bytes) -> None:
    """Write ``data`` to ``path``: temporary file, fsync, ``os.replace``."""
    path = str(path)
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = osp.join(folder, f'.{osp.basename(path)}.{os.getpid()}.'
                   f'{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}')
    # mode 0o666 & ~umask, as open(path, 'wb') would give the file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if osp.exists(tmp):
            os.remove(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)  # make the rename durable
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@register_backend('atomic_local')
class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` with atomic ``put`` / ``put_text``
    (``backend_args=dict(backend='atomic_local')``)."""

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        atomic_write(filepath, obj)

    def put_text(self, obj: str, filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        atomic_write(filepath, obj.encode(encoding))


def write_last_checkpoint(work_dir: str, checkpoint: str) -> None:
    """Record ``checkpoint`` in ``<work_dir>/last_checkpoint``, relative to
    the work dir when it is inside it, atomically."""
    if inside(checkpoint, work_dir):
        checkpoint = osp.relpath(osp.realpath(checkpoint),
                                 osp.realpath(work_dir))
    atomic_write(osp.join(work_dir, LAST_CHECKPOINT), checkpoint.encode())


def remove_partial_files(work_dir: str) -> List[str]:
    """Delete the temporary files of saves a kill interrupted."""
    removed = []
    if osp.isdir(work_dir):
        for name in os.listdir(work_dir):
            if name.startswith('.') and name.endswith(TEMP_SUFFIX):
                os.remove(osp.join(work_dir, name))
                removed.append(name)
    return removed


class Candidate(NamedTuple):
    path: str
    iter: Optional[int]
    epoch: Optional[int]
    problem: Optional[str]


def read_progress(path: str) -> Candidate:
    """``meta['iter']`` / ``meta['epoch']`` of ``path`` (tensors mapped,
    not read); a file that does not load is reported, not raised."""
    try:
        meta = load(path, mmap=True).get('meta')
    except (CheckpointError, OSError) as error:
        return Candidate(path, None, None, str(error))
    if not (isinstance(meta, dict) and 'epoch' in meta and 'iter' in meta):
        return Candidate(path, None, None, 'no meta iter/epoch (not a '
                         'Runner checkpoint)')
    return Candidate(path, meta['iter'], meta['epoch'], None)


def _recorded(work_dir: str) -> Optional[str]:
    """The checkpoint ``last_checkpoint`` names, if it is in ``work_dir``;
    a path outside (a copied work dir, or a crafted record) is replaced by
    the work dir's file of the same name."""
    record = osp.join(work_dir, LAST_CHECKPOINT)
    if not osp.isfile(record):
        return None
    with open(record) as f:
        recorded = f.read().strip()
    if not recorded:
        return None
    path = recorded if osp.isabs(recorded) else osp.join(work_dir, recorded)
    if inside(path, work_dir):
        return path
    local = osp.join(work_dir, osp.basename(recorded))
    print_log(f'{record} names {recorded}, outside this work dir; resuming '
              f'from this work dir\'s own {local} instead', logger='current',
              level=30)
    return local


def find_resume_checkpoint(work_dir: str) -> Optional[str]:
    """The checkpoint auto-resume uses: ``last_checkpoint``'s (inside
    ``work_dir``) if intact, else the intact one of ``work_dir`` that got
    furthest; ``None`` to start afresh.

    Raises:
        CheckpointError: checkpoints are there but none is intact.
    """
    if not osp.isdir(work_dir):
        return None
    recorded = _recorded(work_dir)
    if recorded is not None:
        candidate = read_progress(recorded) if osp.isfile(recorded) else \
            Candidate(recorded, None, None, 'it does not exist')
        if candidate.problem is None:
            return recorded
        print_log(f'{recorded} (named by last_checkpoint) cannot be resumed:'
                  f' {candidate.problem}; looking for the newest intact '
                  'checkpoint', logger='current', level=30)
    names = sorted(n for n in os.listdir(work_dir)
                   if n.endswith('.pth') and not n.startswith('.')
                   and osp.isfile(osp.join(work_dir, n)))
    found = [read_progress(osp.join(work_dir, n)) for n in names]
    intact = sorted((c for c in found if c.problem is None),
                    key=lambda c: (c.iter, c.epoch, osp.getmtime(c.path)),
                    reverse=True)
    if intact:
        print_log(f'Auto-resume: {intact[0].path} (iter {intact[0].iter}) is '
                  f'the newest intact checkpoint of {work_dir}',
                  logger='current')
        return intact[0].path
    if not found:
        return None
    broken = '\n'.join(f'  {c.path}: {c.problem}' for c in found)
    raise CheckpointError(
        f'--resume found checkpoints in {work_dir} but none is intact:\n'
        f'{broken}\nResume from a copy you trust with --resume PATH, or '
        'move these files away to start afresh.')
