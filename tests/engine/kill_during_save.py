"""Imported by the kill-and-resume test configs (``custom_imports``): with
``TLALIGN_TEST_KILL_AT_SAVE=N``, the process SIGKILLs itself inside the N-th
atomic ``.pth`` save (:func:`tlalign_mm.checkpoint.files.atomic_write`),
after the bytes went to the temporary file and before the rename: a kill
during a checkpoint write, at a reproducible point."""
import os
import signal
import types

from tlalign_mm.checkpoint import files

KILL_AT, saves = int(os.environ.get('TLALIGN_TEST_KILL_AT_SAVE', '0')), []


def _fsync(fd):
    path = os.readlink(f'/proc/self/fd/{fd}')
    if '.pth.' in os.path.basename(path):
        saves.append(path)
        if len(saves) == KILL_AT:
            print(f'KILLED DURING SAVE {path}', flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    os.fsync(fd)


if KILL_AT:  # files.py's os, with this fsync
    files.os = types.SimpleNamespace(**dict(vars(os), fsync=_fsync))
