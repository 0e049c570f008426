"""Atomic checkpoint writes: a temporary file, then a rename.

mmengine's ``LocalBackend.put`` opens the checkpoint path and writes into
it, so a process killed during the write (preemption, out-of-memory kill,
full disk) leaves a truncated file under the final name, which
``last_checkpoint`` then points to. Here the bytes go to a temporary file in
the same directory, are flushed to disk, and only then renamed over the
final name (``os.replace`` is atomic on POSIX): the final name holds the
previous complete file or the new complete file, never part of one.
"""
import os
import os.path as osp
import uuid
from pathlib import Path
from typing import Union

from mmengine.fileio import LocalBackend, register_backend

__all__ = ['AtomicLocalBackend', 'TEMP_SUFFIX', 'atomic_write']

#: Suffix of the temporary files (a kill can leave one behind; they are
#: never read as checkpoints).
TEMP_SUFFIX = '.partial'


def atomic_write(path: Union[str, Path], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, fsync,
    ``os.replace``)."""
    path = str(path)
    folder = osp.dirname(osp.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = osp.join(
        folder, f'.{osp.basename(path)}.{os.getpid()}.'
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
    try:  # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:  # pragma: no cover - e.g. filesystems without dir fsync
        pass


@register_backend('atomic_local')
class AtomicLocalBackend(LocalBackend):
    """mmengine's :class:`~mmengine.fileio.LocalBackend` with atomic
    ``put``/``put_text``.

    Select it with ``backend_args=dict(backend='atomic_local')`` (e.g. on a
    ``CheckpointHook``); :class:`~tlalign_mm.engine.SafeResumeHook` does so
    for every local ``CheckpointHook`` that sets no ``backend_args``.
    """

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        atomic_write(filepath, obj)

    def put_text(self,
                 obj: str,
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        atomic_write(filepath, obj.encode(encoding))
