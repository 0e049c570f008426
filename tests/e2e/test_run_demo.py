"""tools/run_demo.py on a short job (ViT, two seeds, two epochs on part of
the data): the summary files and the picture, and that a run is
deterministic (same seed, bit-identical weights) whether it ran in the
job's forked worker or alone through tools/train.py."""
import json
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch

import tlalign_mm  # noqa: F401  (allow-lists mmengine checkpoint types)
from tests.tool_scripts import load_tool

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SMALL = ['train_dataloader.dataset.indices=128',
         'val_dataloader.dataset.indices=64',
         'test_dataloader.dataset.indices=64']


def run(args, timeout=900, env=None):
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope='module')
def job(tmp_path_factory):
    work = str(tmp_path_factory.mktemp('demo'))
    out = run([sys.executable, 'tools/run_demo.py', '--models', 'ViT',
               '--seeds', '0', '1', '--epochs', '2', '--jobs', '2',
               '--work-dir', work, '--cfg-options', *SMALL])
    return work, out


@pytest.mark.e2e
def test_summary_files_and_picture(job):
    work, out = job
    with open(osp.join(work, 'summary.json')) as f:
        summary = json.load(f)
    assert summary['seeds'] == [0, 1] and summary['epochs'] == 2
    runs = summary['runs']
    assert sorted((r['target'], r['seed']) for r in runs) == [
        ('CutMix', 0), ('CutMix', 1), ('TL-Align', 0), ('TL-Align', 1)]
    for r in runs:
        assert r['val_epochs'] == [2] and 0 <= r['top1'] <= 100
        assert 0 <= r['label_shift']['mean_abs'] <= 1
        assert r['label_shift']['num_images'] == 64
        assert r['wall_s'] > 0
    drift = [r['label_drift'] for r in runs if r['target'] == 'TL-Align']
    assert all(d['abs_diff']['epochs'] == [1, 2] for d in drift)
    assert all(r['label_drift'] == {} for r in runs
               if r['target'] == 'CutMix')

    vit = summary['models']['ViT']
    paired = vit['paired']['TL-Align']
    acc = {(r['target'], r['seed']): r['top1'] for r in runs}
    diffs = [acc['TL-Align', s] - acc['CutMix', s] for s in (0, 1)]
    assert paired['diffs'] == pytest.approx(diffs)
    assert paired['mean'] == pytest.approx(np.mean(diffs))
    assert paired['wins'] + paired['losses'] + paired['ties'] == 2
    assert vit['targets']['CutMix']['n'] == 2

    with open(osp.join(work, 'summary.md')) as f:
        md = f.read()
    assert '| ViT |' in md and 'TL-Align − CutMix (95% CI)' in md
    assert md.strip() in out  # the table printed is the table written
    assert 'job wall time' in out and 'Per-run wall time' in out

    # the picture: one model, two panels (3.6 x 6.0 inches at 100 dpi)
    import matplotlib.image
    png = matplotlib.image.imread(osp.join(work, 'summary.png'))
    assert png.shape[:2] == (600, 360)
    assert png[..., :3].std() > 0.05  # not blank

    # --summarize re-reads the runs and writes the same numbers
    run([sys.executable, 'tools/run_demo.py', '--models', 'ViT', '--seeds',
         '0', '1', '--epochs', '2', '--work-dir', work, '--summarize'])
    with open(osp.join(work, 'summary.json')) as f:
        again = json.load(f)
    assert again['models'] == summary['models']
    assert again['wall_s'] == summary['wall_s']


@pytest.mark.e2e
def test_same_seed_bit_identical_weights(job, tmp_path):
    work, _ = job
    with open(osp.join(work, 'vit_tl-align_seed1', 'run.json')) as f:
        record = json.load(f)
    alone = str(tmp_path / 'alone')
    # bit-identical needs the same thread count (a product's reduction order
    # depends on it); the record says which, and how to repeat the run
    assert record['threads'] == 1
    assert record['command'].startswith(
        'OMP_NUM_THREADS=1 python tools/train.py configs/demo/')
    env = dict(os.environ, OMP_NUM_THREADS=str(record['threads']))
    run([sys.executable, 'tools/train.py', record['config'], '--work-dir',
         alone, '--cfg-options', *record['options']], env=env)
    ours = torch.load(record['checkpoint'], weights_only=True)['state_dict']
    theirs = torch.load(osp.join(alone, 'epoch_2.pth'),
                        weights_only=True)['state_dict']
    assert list(ours) == list(theirs)
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


def load_run_demo(monkeypatch):
    # the module pins its thread count in the environment; put it back after
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        before = os.environ.get(name)
        monkeypatch.setenv(name, before or '')  # recorded: restored after
        if before is None:
            monkeypatch.delenv(name)
    return load_tool('run_demo.py')


def test_epochs_scale_the_schedule_or_fail_clearly(monkeypatch):
    run_demo = load_run_demo(monkeypatch)
    assert run_demo.epoch_options(None) == []
    # the recipe's 3 of 30 warm-up epochs: a tenth of the run, at least 1
    assert run_demo.epoch_options(30)[1:] == [
        'param_scheduler.0.end=3', 'param_scheduler.1.begin=3']
    assert run_demo.epoch_options(10)[1:] == [
        'param_scheduler.0.end=1', 'param_scheduler.1.begin=1']
    assert run_demo.epoch_options(2)[0] == 'train_cfg.max_epochs=2'
    with pytest.raises(SystemExit, match='at least 2 epochs'):
        run_demo.epoch_options(1)


def test_early_epoch_is_a_third_of_the_way(monkeypatch):
    run_demo = load_run_demo(monkeypatch)
    runs = [dict(val_epochs=list(range(2, 31, 2)))] * 2
    assert run_demo.early_epoch(runs) == 10
    assert run_demo.early_epoch([dict(val_epochs=[2])]) is None
