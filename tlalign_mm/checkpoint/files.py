"""Checkpoint files in a work dir: atomic writes, and which file an
auto-resume picks.

mmengine's ``LocalBackend.put`` writes into the final path (a kill during a
save leaves a truncated file that ``last_checkpoint`` names), and
``last_checkpoint`` holds an absolute path (a copied work dir resumes from
the original's files). Here writes go to a temporary file renamed with
``os.replace``, ``last_checkpoint`` is read inside the work dir only, and
auto-resume falls back to the newest intact checkpoint of the work dir.
A temporary file's name says which process of which host writes it: only
that process's, once it is gone, is ever removed.
"""
import glob
import os
import os.path as osp
import re
import socket
import uuid
from pathlib import Path
from typing import Callable, Optional, Union

from mmengine.fileio import LocalBackend, register_backend
from mmengine.logging import print_log

from .load import CheckpointError, load

HOST = re.sub(r'[^\w.-]', '-', socket.gethostname())
#: ``.<name>.<pid>@<host>.<8 hex digits>.partial``: :func:`atomic_write`'s
PARTIAL = re.compile(r'\.(?P<name>.+)\.(?P<pid>\d+)@(?P<host>[\w.-]+)'
                     r'\.[0-9a-f]{8}\.partial')


def atomic_write(path, data: Union[bytes, Callable],
                 check: Optional[Callable[[str], None]] = None) -> None:
    """Write ``data`` (bytes, or a function writing to a binary file) to
    ``path``: a temporary file of :data:`PARTIAL`'s name beside it, fsync,
    ``check(temporary path)`` if given, ``os.replace``. A symlink at
    ``path`` is replaced, never written through; a failed write or check
    leaves no file.

    Raises:
        IsADirectoryError: ``path`` is a directory.
    """
    folder, name = osp.split(osp.abspath(path))
    if osp.isdir(path):
        raise IsADirectoryError(f'{path} is a directory: give a file path')
    os.makedirs(folder, exist_ok=True)
    tmp = osp.join(folder, f'.{name}.{os.getpid()}@{HOST}.'
                   f'{uuid.uuid4().hex[:8]}.partial')
    # mode 0o666 & ~umask, as open(path, 'wb') would give the file;
    # O_EXCL: never through a link planted at the temporary name
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            data(f) if callable(data) else f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    finally:  # a failed write leaves no temporary file
        if osp.lexists(tmp):
            os.remove(tmp)


@register_backend('atomic_local')
class AtomicLocalBackend(LocalBackend):
    """mmengine's ``LocalBackend`` with atomic ``put`` / ``put_text``."""

    def put(self, obj: bytes, filepath) -> None:
        atomic_write(filepath, obj)

    def put_text(self, obj: str, filepath, encoding: str = 'utf-8') -> None:
        atomic_write(filepath, obj.encode(encoding))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's
        return False
    return False


def remove_partial_files(work_dir: str) -> list:
    """Delete the temporary files :func:`atomic_write` left in ``work_dir``
    when a kill interrupted a save: those of a process of this host that is
    gone. Another running process's (a training saving while a test reads
    the same work dir), another host's, and anything else (a directory, a
    link, a file of another name) stay."""
    paths = []
    for entry in os.scandir(work_dir):
        match = PARTIAL.fullmatch(entry.name)
        if match and match['host'] == HOST and entry.is_file(
                follow_symlinks=False) and _gone(int(match['pid'])):
            os.remove(entry.path)
            paths.append(entry.path)
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
