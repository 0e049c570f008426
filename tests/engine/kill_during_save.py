"""Imported by the kill-and-resume test configs (``custom_imports``).

With ``TLALIGN_TEST_KILL_AT_SAVE=N`` in the environment, the process
SIGKILLs itself inside the N-th atomic checkpoint save
(:func:`tlalign_mm.checkpoint.files.atomic_write`), after the bytes
went to the temporary file and before the rename: a kill during a
checkpoint write, at a reproducible point.
"""
import os
import signal

from tlalign_mm.checkpoint import files as atomic_backend

KILL_AT = int(os.environ.get('TLALIGN_TEST_KILL_AT_SAVE', '0'))


class _KillingOs:
    """``os`` for ``tlalign_mm.checkpoint.files``, whose ``fsync`` of the N-th
    checkpoint temporary file kills the process."""

    saves = 0

    def __getattr__(self, name):
        return getattr(os, name)

    def fsync(self, fd):
        try:
            path = os.readlink(f'/proc/self/fd/{fd}')
        except OSError:
            path = ''
        if '.pth.' in os.path.basename(path):
            _KillingOs.saves += 1
            if _KillingOs.saves == KILL_AT:
                print(f'KILLED DURING SAVE {path}', flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        return os.fsync(fd)


if KILL_AT:
    atomic_backend.os = _KillingOs()
