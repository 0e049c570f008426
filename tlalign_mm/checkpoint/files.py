"""Checkpoint files in a work dir: atomic writes, and which file an
auto-resume picks.

mmengine's ``LocalBackend.put`` writes into the final path (a kill during a
save leaves a truncated file that ``last_checkpoint`` names), and
``last_checkpoint`` holds an absolute path (a copied work dir resumes from
the original's files). Here writes go to a temporary file renamed with
``os.replace``, ``last_checkpoint`` is read inside the work dir only, and
auto-resume falls back to the newest intact checkpoint of the work dir.
"""
import glob
import os
import os.path as osp
import uuid
from pathlib import Path

from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import print_log

from .load import CheckpointError, load

TEMP_SUFFIX = '.partial'


def atomic_write(path, data: bytes) -> None:
    """Write ``data`` to ``path``: temporary file, fsync, ``os.replace``."""
    folder, name = osp.split(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = osp.join(folder, f'.{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}'
                   f'{TEMP_SUFFIX}')
    # mode 0o666 & ~umask, as open(path, 'wb') would give the file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:  # a failed write leaves no temporary file
        if osp.exists(tmp):
            os.remove(tmp)


@register_backend('atomic_local')
class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` with atomic ``put`` / ``put_text``."""

    def put(self, obj: bytes, filepath) -> None:
        atomic_write(filepath, obj)

    def put_text(self, obj: str, filepath, encoding: str = 'utf-8') -> None:
        atomic_write(filepath, obj.encode(encoding))


def remove_partial_files(work_dir: str) -> list:
    """Delete the temporary files of saves a kill interrupted."""
    paths = glob.glob(osp.join(glob.escape(work_dir), f'.*{TEMP_SUFFIX}'))
    for path in paths:
        os.remove(path)
    return paths


def _progress(path: str, work_dir: str):
    """``(meta iter, meta epoch)`` of the work dir's file ``path`` (tensors
    mapped, not read), or why it cannot be resumed (a string)."""
    if not osp.isfile(path):
        return 'it does not exist'
    if osp.dirname(osp.realpath(path)) != osp.realpath(work_dir):
        return f'it links to {osp.realpath(path)}, outside the work dir'
    try:
        meta = load(path, mmap=True).get('meta', {})
    except (CheckpointError, OSError) as error:
        return str(error)
    return (meta['iter'], meta['epoch']) if {'epoch', 'iter'} <= set(meta) \
        else 'no meta iter/epoch (not a Runner checkpoint)'


def find_resume_checkpoint(work_dir: str):
    """The checkpoint auto-resume uses: the work dir's file of the name
    ``last_checkpoint`` records, if intact, else the intact one of
    ``work_dir`` that got furthest; ``None`` to start afresh. Never a file
    outside ``work_dir`` (one a symlink resolves to is not intact).

    Raises:
        CheckpointError: checkpoints are there but none is intact.
    """
    if not osp.isdir(work_dir):
        return None
    record = osp.join(work_dir, 'last_checkpoint')
    recorded = Path(record).read_text().strip() if osp.isfile(record) else ''
    if recorded:
        path = osp.join(work_dir, osp.basename(recorded))
        if osp.abspath(osp.join(work_dir, recorded)) != osp.abspath(path):
            print_log(f'{record} names {recorded}, outside this work dir; '
                      f"resuming from this work dir's own {path} instead",
                      'current', 30)
        problem = _progress(path, work_dir)
        if not isinstance(problem, str):
            return path
        print_log(f'{path} (named by last_checkpoint) cannot be resumed: '
                  f'{problem}; looking for the newest intact checkpoint',
                  'current', 30)
    # glob's '*' skips hidden names: temporary files of interrupted saves
    found = {p: _progress(p, work_dir) for p in sorted(
        glob.glob(osp.join(glob.escape(work_dir), '*.pth'))) if osp.isfile(p)}
    intact = [p for p, got in found.items() if not isinstance(got, str)]
    if intact:
        best = max(intact, key=lambda p: (*found[p], osp.getmtime(p)))
        print_log(f'Auto-resume: {best} (iter {found[best][0]}) is the '
                  f'newest intact checkpoint of {work_dir}', 'current')
        return best
    if found:
        broken = '\n'.join(f'  {p}: {problem}' for p, problem in found.items())
        raise CheckpointError(
            f'--resume found checkpoints in {work_dir} but none is intact:\n'
            f'{broken}\nResume from a copy you trust with --resume PATH, or '
            'move these files away to start afresh.')
    print_log(f'{work_dir} has no checkpoint to resume: starting afresh',
              'current', 30)
    return None
