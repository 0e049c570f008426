"""Imported by the kill-and-resume test configs (``custom_imports``), to
stop a run at a reproducible point:

* ``TLALIGN_TEST_KILL_AT_SAVE=N``: the process SIGKILLs itself inside the
  N-th atomic ``.pth`` save (:func:`tlalign_mm.checkpoint.files.
  atomic_write`), after the bytes went to the temporary file and before the
  rename: a kill during a checkpoint write.
* ``TLALIGN_TEST_SIGNAL_AT=SIGNAL:train:N`` (or ``SIGNAL:val:N``): the
  process sends itself SIGNAL (SIGINT, SIGTERM) as training iteration N
  (the runner's count, from 0) or validation batch N begins: Ctrl-C in the
  middle of an iteration.
"""
import os
import signal
import types

from mmengine.runner import loops

from tlalign_mm.checkpoint import files

KILL_AT, saves = int(os.environ.get('TLALIGN_TEST_KILL_AT_SAVE', '0')), []
SIGNAL_AT = os.environ.get('TLALIGN_TEST_SIGNAL_AT', '')


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


def _signal_at(loop_class, at: int, signum: int, count):
    run_iter = loop_class.run_iter

    def run_iter_signalled(self, *args, **kwargs):
        if count(self, args) == at:
            print(f'SENDING {signal.Signals(signum).name}', flush=True)
            os.kill(os.getpid(), signum)
        return run_iter(self, *args, **kwargs)
    loop_class.run_iter = run_iter_signalled


if SIGNAL_AT:
    name, where, at = SIGNAL_AT.split(':')
    signum = getattr(signal, name)
    if where == 'train':
        for loop in (loops.EpochBasedTrainLoop, loops.IterBasedTrainLoop):
            _signal_at(loop, int(at), signum,
                       lambda loop, args: loop.runner.iter)
    else:  # ValLoop.run_iter(idx, data_batch)
        _signal_at(loops.ValLoop, int(at), signum,
                   lambda loop, args: args[0])
