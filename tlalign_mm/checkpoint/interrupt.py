"""Ctrl-C and SIGTERM while ``tools/train.py`` trains.

Inside :func:`saving_on_signals`, the first SIGINT or SIGTERM is recorded,
not raised: :class:`~.hooks.LastCheckpointHook` sees it once the iteration
under way has finished (:func:`pending`), saves that state to ``last.pth``
as its periodic saves do (exact resume included) and ends the run with
:class:`TrainingInterrupted`, which the tool prints as one line with the
command that resumes. A second signal acts as it would have without this
(Ctrl-C: ``KeyboardInterrupt`` at once). Signals are the process's, so the
record is too; only the main thread can install handlers.
"""
import contextlib
import os
import signal
import threading
from typing import Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_pending: Optional[int] = None


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on a signal after saving ``path`` (``iteration``
    iterations trained). ``status``: the exit status a shell gives a
    process that signal ended (128 + its number); ``resume``: the command
    that resumes, set by the tool that knows its command line."""

    def __init__(self, signum: int, iteration: int, path: str):
        super().__init__(signum, iteration, path)
        self.signum, self.iteration, self.path = signum, iteration, path
        self.status = 128 + signum
        self.resume: Optional[str] = None

    def __str__(self) -> str:
        how = self.resume or 'the same command with --resume'
        return (f'interrupted ({signal.Signals(self.signum).name}) after '
                f'iteration {self.iteration}: its state is in {self.path}; '
                f'to resume: {how}')


def pending() -> Optional[int]:
    """The signal received inside :func:`saving_on_signals` (None: none)."""
    return _pending


def _record(signum: int, frame, previous: dict, owner: int) -> None:
    global _pending
    if os.getpid() != owner:
        # a forked DataLoader worker (Ctrl-C reaches the whole process
        # group): it goes on serving batches until the run ends
        return
    _pending = signum
    for sig, handler in previous.items():  # the next one acts at once
        signal.signal(sig, handler)
    # os.write: print() may be inside a write to the same stream right now
    os.write(2, f'\n{signal.Signals(signum).name}: saving the state once '
             'this iteration has finished (again to stop now)\n'.encode())


@contextlib.contextmanager
def saving_on_signals(enabled: bool = True):
    """While inside, SIGINT and SIGTERM are recorded for
    :class:`~.hooks.LastCheckpointHook` (see the module docstring); on
    leaving, the handlers before are back. ``enabled=False`` (several
    processes: each would stop at another iteration, and DDP would wait for
    the others) or outside the main thread: nothing changes."""
    global _pending
    if not enabled or threading.current_thread() is not \
            threading.main_thread():
        yield
        return
    # None: a handler not set from Python, which it cannot set back; an
    # ignored signal (SIGINT of a background job, nohup) stays ignored
    previous = {sig: signal.getsignal(sig) or signal.SIG_DFL
                for sig in SIGNALS
                if signal.getsignal(sig) is not signal.SIG_IGN}
    owner = os.getpid()
    for sig in previous:
        signal.signal(sig, lambda s, f: _record(s, f, previous, owner))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _pending = None
