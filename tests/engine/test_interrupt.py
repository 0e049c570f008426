"""Ctrl-C and SIGTERM while tools/train.py trains
(:mod:`tlalign_mm.checkpoint.interrupt`): the first is recorded for
LastCheckpointHook, the second acts as before, the handlers are put back,
an ignored signal stays ignored, a forked DataLoader worker goes on. (The
save and the resume: test_kill_and_resume.py.)"""
import os
import signal

import pytest

from tlalign_mm.checkpoint import interrupt


@pytest.fixture
def ctrl_c():
    """SIGINT as a foreground Python process has it (pytest may run where
    it is ignored), put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield lambda: os.kill(os.getpid(), signal.SIGINT)
    signal.signal(signal.SIGINT, before)


def test_the_first_signal_is_recorded_the_second_acts(ctrl_c, capfd):
    with interrupt.saving_on_signals():
        assert interrupt.pending() is None
        ctrl_c()
        assert interrupt.pending() == signal.SIGINT  # no KeyboardInterrupt
        assert 'SIGINT: saving the state once this iteration has finished' \
            in capfd.readouterr().err
        with pytest.raises(KeyboardInterrupt):
            ctrl_c()
    assert interrupt.pending() is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_off_ignored_and_in_a_worker_nothing_changes(ctrl_c):
    with interrupt.saving_on_signals(enabled=False):  # several processes
        with pytest.raises(KeyboardInterrupt):
            ctrl_c()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job
    with interrupt.saving_on_signals():
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        ctrl_c()
        assert interrupt.pending() is None
    with interrupt.saving_on_signals():
        interrupt._record(signal.SIGTERM, None, {}, owner=os.getpid() + 1)
        assert interrupt.pending() is None
