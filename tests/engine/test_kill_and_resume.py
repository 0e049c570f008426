"""Kill a training run (SIGKILL, in a subprocess) and resume it: the final
weights equal the uninterrupted run's bit for bit.

Every run is the real ``tools/train.py`` on the tiny config of
:mod:`tests.engine.tiny_run` (ViT, CutMix, random crops and flips,
drop-path, validation; ``LastCheckpointHook`` every 2 iterations). The kill
point is drawn at random (seeded; printed on failure).
"""
import os
import os.path as osp
import random
import re
import shutil
import signal
import subprocess
import sys

import pytest
import torch

import tlalign_mm  # noqa: F401  allow-list for reading the checkpoints

from .tiny_run import (
    EPOCHS,
    INTERVAL,
    ITERS_PER_EPOCH,
    write_config,
    write_images,
)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TRAIN = osp.join(ROOT, 'tools', 'train.py')
TOTAL = EPOCHS * ITERS_PER_EPOCH
LOG = re.compile(r'(?:Epoch\(train\) +\[(\d+)\]\[ *(\d+)/\d+\]|'
                 r'Iter\(train\) +\[ *(\d+)/\d+\])')
RESUMED = re.compile(r'resumed epoch: (\d+), iter: (\d+)')

pytestmark = pytest.mark.e2e


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1',
               PYTHONUNBUFFERED='1')
    env.update(extra)
    return env


def _iteration(line):
    """The global iteration a training log line reports, else None."""
    match = LOG.search(line)
    if not match:
        return None
    if match.group(3):
        return int(match.group(3))
    return (int(match.group(1)) - 1) * ITERS_PER_EPOCH + int(match.group(2))


def _train(config, work_dir, *args, kill_after=None, env=None):
    """Run tools/train.py; with ``kill_after=k``, SIGKILL it once it has
    logged iteration k. Returns (returncode, output, last logged iter)."""
    proc = subprocess.Popen(
        [sys.executable, TRAIN, config, '--work-dir', work_dir, *args],
        cwd=ROOT, env=env or _env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    lines, last = [], 0
    for line in proc.stdout:
        lines.append(line)
        last = _iteration(line) or last
        if kill_after is not None and last >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=300)
    rest = proc.stdout.read()
    proc.stdout.close()
    return proc.returncode, ''.join(lines) + rest, last


def _final_weights(work_dir, loop):
    name = f'epoch_{EPOCHS}.pth' if loop == 'epoch' else f'iter_{TOTAL}.pth'
    ckpt = torch.load(osp.join(work_dir, name), map_location='cpu',
                      weights_only=True)
    return ckpt['state_dict']


def _assert_bit_identical(got, want, context):
    assert set(got) == set(want), context
    for key in want:
        assert torch.equal(got[key], want[key]), f'{key} differs; {context}'


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp('kill_and_resume')
    data = str(root / 'data')
    write_images(data)
    configs, reference = {}, {}
    for loop in ('epoch', 'iter'):
        configs[loop] = str(root / f'{loop}.py')
        write_config(configs[loop], data, loop)
    return root, configs, reference


def _reference(setup, loop):
    """The uninterrupted run's final weights (run once per loop type)."""
    root, configs, reference = setup
    if loop not in reference:
        work_dir = str(root / f'uninterrupted_{loop}')
        code, out, _ = _train(configs[loop], work_dir)
        assert code == 0, out[-4000:]
        reference[loop] = _final_weights(work_dir, loop)
    return reference[loop]


@pytest.mark.parametrize('loop', ['epoch', 'iter'])
def test_kill_at_random_iteration_resumes_bit_identical(setup, loop):
    root, configs, _ = setup
    want = _reference(setup, loop)
    kill_after = random.Random(f'kill-{loop}-d').randint(INTERVAL + 1,
                                                        TOTAL - 2)
    work_dir = str(root / f'killed_{loop}')
    code, out, killed_at = _train(configs[loop], work_dir,
                                  kill_after=kill_after)
    context = f'killed after iteration {killed_at} (drawn {kill_after})'
    assert code == -signal.SIGKILL, f'{context}\n{out[-3000:]}'

    code, out, _ = _train(configs[loop], work_dir, '--resume')
    assert code == 0, f'{context}\n{out[-4000:]}'
    assert RESUMED.search(out), f'{context}: did not resume\n{out[-3000:]}'
    epoch, resumed_iter = map(int, RESUMED.search(out).groups())
    # the periodic checkpoint bounds the loss: at most INTERVAL iterations
    # (plus the one that was running when the kill landed)
    print(f'{loop} loop: {context}; resumed at iteration {resumed_iter}, '
          f'lost {killed_at - resumed_iter} (interval {INTERVAL})')
    assert killed_at - resumed_iter <= INTERVAL, (context, resumed_iter)
    assert f'iter: {resumed_iter}' in out
    _assert_bit_identical(_final_weights(work_dir, loop), want,
                          f'{context}, resumed at {resumed_iter}')


@pytest.mark.parametrize('loop', ['epoch', 'iter'])
def test_unseeded_run_resumes_as_the_run_with_its_seed(setup, loop):
    """``randomness.seed=None``, the default of mmpretrain's, mmseg's and
    mmdet's runtimes (so of the ImageNet, UperNet and Cascade configs): the
    run draws a seed, and killed and resumed it ends as the uninterrupted
    run with that seed. mmengine restores the global seed on resume but not
    the sampler's, which it built with the new run's draw: the resumed
    epochs (the iteration loop's whole stream) were shuffled otherwise."""
    root, configs, _ = setup
    with open(configs[loop]) as f:
        text = f.read()
    seeded = 'randomness = dict(seed=0,'
    assert seeded in text
    config = str(root / f'unseeded_{loop}.py')
    with open(config, 'w') as f:
        f.write(text.replace(seeded, 'randomness = dict(seed=None,'))
    work_dir = str(root / f'unseeded_{loop}')
    code, out, killed_at = _train(config, work_dir,
                                  kill_after=ITERS_PER_EPOCH + INTERVAL + 1)
    assert code == -signal.SIGKILL, out[-3000:]
    seed = torch.load(osp.join(work_dir, 'last.pth'), map_location='cpu',
                      weights_only=True)['meta']['seed']
    code, out, _ = _train(config, work_dir, '--resume')
    assert code == 0, out[-4000:]
    assert RESUMED.search(out), out[-3000:]
    reference = str(root / f'seeded_{seed}_{loop}')
    code, out, _ = _train(config, reference, '--cfg-options',
                          f'randomness.seed={seed}')
    assert code == 0, out[-4000:]
    _assert_bit_identical(_final_weights(work_dir, loop),
                          _final_weights(reference, loop),
                          f'killed after iteration {killed_at}, seed {seed}')


def test_kill_during_checkpoint_write_resumes_mid_epoch(setup):
    """SIGKILL inside a checkpoint save (after the bytes went to the
    temporary file, before the rename): no file appears under the final
    name, the interrupted save's temporary file is cleaned up, and the run
    resumes from the previous checkpoint, here in the middle of an epoch
    (the sampler skips the batches already trained)."""
    root, configs, _ = setup
    want = _reference(setup, 'epoch')
    work_dir = str(root / 'killed_during_save')
    # .pth saves: last.pth at iterations 2, 4, 6, 8 (LastCheckpointHook),
    # epoch_1/2/3.pth after 3, 6, 9 (CheckpointHook, max_keep_ckpts=1, which
    # deletes epoch_2.pth before writing epoch_3.pth): the 7th is
    # epoch_3.pth
    code, out, _ = _train(configs['epoch'], work_dir,
                          env=_env(TLALIGN_TEST_KILL_AT_SAVE='7'))
    assert code == -signal.SIGKILL and 'KILLED DURING SAVE' in out, \
        out[-3000:]
    assert '/.epoch_3.pth.' in re.search(r'KILLED DURING SAVE (\S+)',
                                         out).group(1)
    names = os.listdir(work_dir)
    assert 'epoch_3.pth' not in names and 'epoch_2.pth' not in names
    assert len([n for n in names if n.endswith('.partial')]) == 1

    code, out, _ = _train(configs['epoch'], work_dir, '--resume')
    assert code == 0, out[-4000:]
    assert 'Removed 1 partial file' in out
    # last.pth of iteration 8: epoch 3 (index 2), 2 of its 3 batches done
    assert RESUMED.search(out).groups() == ('2', '8')
    assert 'Resuming at batch 2 of the sampler order' in out
    assert not [n for n in os.listdir(work_dir) if n.endswith('.partial')]
    _assert_bit_identical(_final_weights(work_dir, 'epoch'), want,
                          'killed while saving epoch_3.pth')


def test_copied_work_dir_resumes_from_its_own_epoch_checkpoint(setup):
    """A copied work dir resumes from its own files although
    ``last_checkpoint`` holds the original directory's absolute path (as
    mmengine's CheckpointHook writes it). Resuming from an epoch checkpoint
    (saved before that epoch's validation) is exact too: validation draws
    from its own copy of the generator states."""
    root, configs, _ = setup
    want = _reference(setup, 'epoch')
    original = str(root / 'original')
    # the 6th .pth save is last.pth at iteration 8: killed, so
    # last_checkpoint still names epoch_2.pth (iteration 6)
    code, out, _ = _train(configs['epoch'], original,
                          env=_env(TLALIGN_TEST_KILL_AT_SAVE='6'))
    assert code == -signal.SIGKILL, out[-3000:]
    copy = str(root / 'copied')
    shutil.copytree(original, copy)
    shutil.rmtree(original)  # the original is gone: only the copy counts
    with open(osp.join(copy, 'last_checkpoint')) as f:
        assert f.read().strip() == osp.join(original, 'epoch_2.pth')
    # and the other checkpoint is damaged: only epoch_2.pth can resume
    with open(osp.join(copy, 'last.pth'), 'r+b') as f:
        f.truncate(1000)

    code, out, _ = _train(configs['epoch'], copy, '--resume')
    assert code == 0, out[-4000:]
    assert "resuming from this work dir's own " + osp.join(
        copy, 'epoch_2.pth') in out
    assert RESUMED.search(out).groups() == ('2', '6')
    _assert_bit_identical(_final_weights(copy, 'epoch'), want,
                          'resumed from epoch_2.pth in a copied work dir')
