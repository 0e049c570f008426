"""Resume through ``tools/train.py``: a run killed (SIGKILL, in a
subprocess) or interrupted (SIGINT, SIGTERM: the iteration under way is
saved) and resumed ends with the uninterrupted run's weights bit for
bit. (A hostile checkpoint through ``tools/train.py --resume``:
tests/test_checkpoint_safety.py::test_crafted_runs.)

Every run is the real ``tools/train.py`` on the tiny config of
:mod:`tests.engine.tiny_run` (ViT, CutMix, random crops and flips,
drop-path, validation; ``LastCheckpointHook`` every 2 iterations). Each
loop type is killed inside a checkpoint save (after the bytes went to the
temporary file, before the rename: :mod:`tests.engine.kill_during_save`),
at a fixed save, so which checkpoint it resumes from does not depend on the
machine's speed. Interrupts are sent by the process to itself as a given
iteration or validation batch begins (:mod:`tests.engine.kill_during_save`).
The sampler-seed restore that makes an unseeded run resume exactly is
tested without a subprocess, at the end.
"""
import itertools
import os
import os.path as osp
import re
import shlex
import shutil
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop
from torch.utils.data import BatchSampler

import tlalign_mm  # noqa: F401  allow-list for reading the checkpoints
from tests.cli import ROOT
from tlalign_mm.checkpoint import install
from tlalign_mm.checkpoint.hooks import LastCheckpointHook

from . import tiny_run

TRAIN = osp.join(ROOT, 'tools', 'train.py')
TOTAL = tiny_run.EPOCHS * tiny_run.ITERS_PER_EPOCH
RESUMED = re.compile(r'resumed epoch: (\d+), iter: (\d+)')


def _train(config, work_dir, *args, kill_at_save=None, signal_at=None):
    """Run tools/train.py (SIGKILLed inside its ``kill_at_save``-th .pth
    save, or sent ``signal_at``); returns (returncode, output)."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1',
               PYTHONUNBUFFERED='1')
    if kill_at_save:
        env['TLALIGN_TEST_KILL_AT_SAVE'] = str(kill_at_save)
    if signal_at:
        env['TLALIGN_TEST_SIGNAL_AT'] = signal_at
    proc = subprocess.run(
        [sys.executable, TRAIN, config, *(['--work-dir', work_dir] if
                                          work_dir else []), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=600,
        # SIGINT as a foreground job has it (a background shell's children
        # ignore it, and an ignored signal stays ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc.returncode, proc.stdout


def _load(work_dir, name):
    return torch.load(osp.join(work_dir, name), map_location='cpu',
                      weights_only=True)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('kill_and_resume')
    tiny_run.write_images(str(root / 'data'))
    return root


@pytest.fixture(scope='module')
def reference(data):
    """``reference(loop)``: the config and work dir of an uninterrupted run
    of that loop type (trained once)."""
    done = {}

    def run(loop):
        if loop not in done:
            config = str(data / f'{loop}.py')
            tiny_run.write_config(config, str(data / 'data'), loop)
            work_dir = str(data / f'uninterrupted_{loop}')
            code, out = _train(config, work_dir)
            assert code == 0, out[-4000:]
            done[loop] = config, work_dir
        return done[loop]
    return run


def _final(loop):
    return (f'epoch_{tiny_run.EPOCHS}.pth' if loop == 'epoch' else
            f'iter_{TOTAL}.pth')


def _assert_same_weights(work_dir, reference_dir, loop):
    got, want = (_load(d, _final(loop))['state_dict']
                 for d in (work_dir, reference_dir))
    assert set(got) == set(want)
    for key in want:
        assert torch.equal(got[key], want[key]), f'{key} differs ({loop})'


# The .pth saves, in order. epoch: last.pth at iterations 2, 4, 6, 8
# (LastCheckpointHook), epoch_1/2/3.pth after 3, 6, 9 (CheckpointHook):
# the 6th is last.pth of iteration 8, and last_checkpoint still names
# epoch_2.pth (iteration 6, an epoch boundary, saved before that epoch's
# validation). iter: last.pth at 2, 4, 6, 8, iter_5.pth: the 5th is
# last.pth of iteration 8, last.pth of iteration 6 (saved before the
# validation at 6) is the newest intact. Both resume at iteration 6 of
# the 8 trained: INTERVAL (2) iterations lost, the most a kill can cost.
KILL = {'epoch': (6, ('2', '6')), 'iter': (5, ('0', '6'))}


@pytest.mark.e2e
@pytest.mark.parametrize('loop', ['epoch', 'iter'])
def test_kill_during_a_save_resumes_bit_identical(data, reference, loop):
    """No file appears under the final name (last.pth keeps iteration 6),
    the interrupted save's temporary file is removed on resume, a copied
    work dir resumes from its own files (``last_checkpoint`` names the
    original's absolute path), at most ``INTERVAL`` iterations are lost,
    and validation, which ran after the checkpoint in the uninterrupted
    run, draws from its own copy of the generator states."""
    config, reference_dir = reference(loop)
    save, resumed_at = KILL[loop]
    original = str(data / f'killed_{loop}')
    code, out = _train(config, original, kill_at_save=save)
    assert code == -signal.SIGKILL and 'KILLED DURING SAVE' in out, \
        out[-3000:]
    assert '/.last.pth.' in re.search(r'KILLED DURING SAVE (\S+)',
                                      out).group(1)
    assert _load(original, 'last.pth')['meta']['iter'] == 6
    copy = str(data / f'copied_{loop}')
    shutil.copytree(original, copy)
    shutil.rmtree(original)  # the original is gone: only the copy counts

    code, out = _train(config, copy, '--resume')
    assert code == 0, out[-4000:]
    assert 'Removed 1 partial file' in out  # the one the kill left
    assert RESUMED.search(out).groups() == resumed_at, out[-3000:]
    assert not [n for n in os.listdir(copy) if n.endswith('.partial')]
    _assert_same_weights(copy, reference_dir, loop)


# (loop, signal, where it arrives) -> the iteration saved, where the
# resumed run starts (epoch, iter). Iteration 4 (the 5th, the 2nd batch of
# epoch 2) lies between the saves every 2; the validations come after
# iteration 6 in both loops (the epoch loop's: after epoch 2), saved as
# the state they began with.
INTERRUPT = {
    ('epoch', 'SIGINT:train:4'): (5, ('1', '5')),
    ('epoch', 'SIGTERM:val:0'): (6, ('2', '6')),
    ('iter', 'SIGINT:val:0'): (6, ('0', '6')),
}


@pytest.mark.e2e
@pytest.mark.parametrize('loop, signal_at', list(INTERRUPT))
def test_an_interrupted_run_resumes_bit_identical(data, reference, loop,
                                                  signal_at):
    """Ctrl-C (SIGINT) or SIGTERM in the middle of an iteration: it
    finishes, its state goes to last.pth, and the run ends with one line
    that names the command resuming it (it was a KeyboardInterrupt
    traceback, the work since the last save lost); during a validation,
    the state it began with. The resumed run ends bit-identical."""
    config, reference_dir = reference(loop)
    saved, resumed_at = INTERRUPT[loop, signal_at]
    name = signal_at.split(':')[0]
    work_dir = str(data / f'interrupted_{loop}_{name}')
    code, out = _train(config, work_dir, signal_at=signal_at)
    assert code == 128 + getattr(signal, name), out[-3000:]
    assert 'Traceback' not in out
    command = (f'python tools/train.py {config} --work-dir {work_dir} '
               '--resume')
    assert out.splitlines()[-1] == (
        f'interrupted ({name}) after iteration {saved}: its state is in '
        f'{work_dir}/last.pth; to resume: {command}')
    assert _load(work_dir, 'last.pth')['meta']['iter'] == saved

    argv = shlex.split(command)[2:]  # the command, in this interpreter
    code, out = _train(*argv[:1], None, *argv[1:])
    assert code == 0, out[-4000:]
    assert RESUMED.search(out).groups() == resumed_at, out[-3000:]
    _assert_same_weights(work_dir, reference_dir, loop)


def _runner(loop, seed):
    """What LastCheckpointHook reads of a Runner: a 12-sample training
    loader (batch 4) shuffled with ``seed``, in epoch 2 (DistSamplerSeedHook's
    ``set_epoch``; a no-op for InfiniteSampler), the loop type, resume on."""
    dataset = list(range(12))
    sampler = (DefaultSampler if loop == 'epoch' else InfiniteSampler)(
        dataset, shuffle=True, seed=seed)
    sampler.set_epoch(1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4,
                                         sampler=sampler)
    train_loop = object.__new__(
        EpochBasedTrainLoop if loop == 'epoch' else IterBasedTrainLoop)
    return SimpleNamespace(train_dataloader=loader, train_loop=train_loop,
                           _resume=True, _load_from='last.pth',
                           _randomness_cfg=dict(seed=None))


def _batches(runner, skip):
    return list(itertools.islice(BatchSampler(
        runner.train_dataloader.sampler, 4, False), skip, skip + 2))


@pytest.mark.parametrize('loop', ['epoch', 'iter'])
def test_resumed_batches_are_shuffled_with_the_checkpoints_sampler_seed(
        loop):
    """``randomness.seed=None`` (mmpretrain's, mmseg's and mmdet's default):
    mmengine builds the resumed run's sampler with the new run's seed and
    restores only the global one. LastCheckpointHook saves the sampler's
    seed and, on resume, shuffles with it from the batch the checkpoint
    reached: epoch 2, 1 of its 3 batches trained (epoch loop); iteration 4
    of an infinite stream (iteration loop)."""
    install()  # exact resume is on only for files read through it
    checkpoint = dict(meta=dict(epoch=int(loop == 'epoch'), iter=4))
    LastCheckpointHook(interval=2).before_save_checkpoint(
        _runner(loop, seed=123), checkpoint)
    assert checkpoint['resume_state']['sampler_seed'] == 123

    resumed = _runner(loop, seed=999)  # the new run's own draw
    hook = LastCheckpointHook(interval=2)
    hook.after_load_checkpoint(resumed, checkpoint)
    hook.before_train_epoch(resumed)
    got = list(itertools.islice(resumed.train_dataloader.batch_sampler, 2))
    skip = 1 if loop == 'epoch' else 4
    assert got == _batches(_runner(loop, seed=123), skip)
    # the new run's seed would have shuffled otherwise
    assert got != _batches(_runner(loop, seed=999), skip)
