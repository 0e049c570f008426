"""tools/run_demo.py on a short job (ViT, two seeds, two epochs on part of
the data): the summary files and the picture, and that a run is
deterministic (same seed, bit-identical weights) whether it ran in the
job's forked worker or alone through tools/train.py."""
import json
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

import tlalign_mm  # noqa: F401  (allow-lists mmengine checkpoint types)
from tests.cli import tool_main
from tlalign_mm.apis import demo

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
def test_summary_files_and_picture(job, run_demo_main):
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
    # the paired difference of these (by hand: tests/analysis/
    # test_paired_stats.py)
    assert paired['diffs'] == pytest.approx(diffs)
    assert vit['targets']['CutMix']['n'] == 2

    with open(osp.join(work, 'summary.md')) as f:
        md = f.read()
    assert '| ViT ' in md and 'TL-Align − CutMix (95% CI)' in md
    assert 'p (paired t / Wilcoxon)' in md
    assert f"{paired['p_value']:.3f} / {paired['wilcoxon_p']:.3f}" in md
    assert md.strip() in out  # the table printed is the table written
    # while it ran: a progress line per finished run (not a terminal), with
    # the paired difference so far once a seed's two runs were done
    progress = out[:out.index(md.strip())]
    assert '4/4 runs' in progress
    assert 'ViT TL-Align − CutMix' in progress and 'W/L/T' in progress
    assert 'job wall time' in out and 'Per-run wall time' in out
    assert 'Per run: ' in out and 'ms per iteration' in out
    assert all(r['iters'] == 4 for r in runs)  # 2 epochs of 2 batches

    # the picture: one model, two panels (3.6 x 6.0 inches at 100 dpi)
    import matplotlib.image
    png = matplotlib.image.imread(osp.join(work, 'summary.png'))
    assert png.shape[:2] == (600, 360)
    assert png[..., :3].std() > 0.05  # not blank

    # --summarize re-reads the runs and writes the same numbers
    run_demo_main(['--models', 'ViT', '--seeds', '0', '1', '--epochs', '2',
                   '--work-dir', work, '--summarize'])
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


@pytest.fixture
def run_demo_main(monkeypatch):
    # the script pins its thread count in the environment; put it back after
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        monkeypatch.setenv(name, '1')  # its value; the one before restored
    return tool_main('run_demo.py')


def test_epochs_early_epoch_and_options(run_demo_main, capsys):
    """--epochs scales the schedule (the recipe's 3 of 30 warm-up epochs:
    a tenth, at least 1) or fails clearly; the early epoch is a third of
    the way; --variants and --models do not mix."""
    assert demo.epoch_options(None) == []
    for epochs, warmup in ((30, 3), (10, 1), (2, 1)):
        assert demo.epoch_options(epochs) == [
            f'train_cfg.max_epochs={epochs}', f'param_scheduler.0.end='
            f'{warmup}', f'param_scheduler.1.begin={warmup}']
    with pytest.raises(SystemExit, match='at least 2 epochs'):
        demo.epoch_options(1)
    assert demo.early_epoch([dict(val_epochs=list(range(2, 31, 2)))] *
                            2) == 10
    assert demo.early_epoch([dict(val_epochs=[2])]) is None
    with pytest.raises(SystemExit):
        run_demo_main(['--variants', 'x.py', '--models', 'ViT'])
    assert 'leave out --models' in capsys.readouterr().err


VARIANTS = osp.join(ROOT, 'tools', 'demo_variants')


def _flat(cfg, prefix=''):
    """A merged config as ``{dotted key: value}`` (lists kept whole)."""
    out = {}
    for key, value in cfg.items():
        if isinstance(value, dict):
            out.update(_flat(value, f'{prefix}{key}.'))
        else:
            out[f'{prefix}{key}'] = value
    return out


@pytest.mark.parametrize('path', sorted(
    osp.join(VARIANTS, f) for f in os.listdir(VARIANTS)
    if f.endswith('.py')))
def test_each_variant_row_is_its_base_twin_with_exactly_the_named_change(
        path):
    """Every row of every committed variants file, both targets: the merged
    config of the row's run differs from its base twin's (the same model,
    target and seed, no row options) in exactly the keys its options name,
    with those values; and the row builds."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    init_default_scope('mmpretrain')
    rows = demo.read_variants(path)
    base_rows = [demo.Row(model, model) for model in demo.MODELS]
    base = {(j.model, j.target): j for j in demo.make_jobs(
        base_rows, list(demo.TARGETS), [3], '/nonexistent')}
    jobs = demo.make_jobs(rows, list(demo.TARGETS), [3], '/nonexistent')
    assert len(jobs) == len(rows) * len(demo.TARGETS)
    for job in jobs:
        row = next(r for r in rows if r.name == job.model)
        twin = base[(row.model, job.target)]
        assert job.config == twin.config and job.seed == twin.seed == 3
        named = demo.cfg_options(
            row.options + (row.tlalign_options
                           if job.target != demo.BASELINE else ()))
        # a row changes something, at least on its TL-Align twin
        assert named or job.target == demo.BASELINE, row.name
        ours = Config.fromfile(job.config)
        ours.merge_from_dict(demo.cfg_options(job.options))
        MODELS.build(ours.model)  # a misspelt option would fail here
        theirs = Config.fromfile(twin.config)
        theirs.merge_from_dict(demo.cfg_options(twin.options))
        ours, theirs = _flat(ours.to_dict()), _flat(theirs.to_dict())
        changed = {k for k in set(ours) | set(theirs)
                   if ours.get(k, KeyError) != theirs.get(k, KeyError)}
        assert changed == set(named), (row.name, job.target, changed)
        assert all(ours[k] == v for k, v in named.items())
        assert 'randomness.seed' not in changed


@pytest.mark.parametrize('text, message', [
    ("variants = []", 'defines no'),
    ("variants = [dict(name='a', model='DeiT')]", 'is not one of'),
    ("variants = [dict(name='a b', model='ViT')]", 'letters, digits'),
    ("variants = [dict(name='a', model='ViT', option=['x=1'])]", 'keys'),
    ("variants = [dict(name='a', model='ViT', options='x=1')]",
     'key=value'),
    ("variants = [dict(name='a', model='ViT'), dict(name='a', model='ViT')]",
     'repeats'),
])
def test_bad_variants_file_fails_clearly(tmp_path, text, message):
    path = tmp_path / 'rows.py'
    path.write_text(text + '\n')
    with pytest.raises(SystemExit, match=message):
        demo.read_variants(str(path))
    with pytest.raises(SystemExit, match='no such file'):
        demo.read_variants(str(tmp_path / 'missing.py'))


def test_progress_line_pairs_the_finished_seeds(tmp_path):
    """The progress line's difference is over the seeds both of whose runs
    finished; a failed run counts for nothing."""
    jobs = demo.make_jobs([demo.Row('ViT', 'ViT')], list(demo.TARGETS),
                          [0, 1, 2], str(tmp_path))
    top1 = {('CutMix', 0): 90.0, ('TL-Align', 0): 91.0,
            ('CutMix', 1): 90.0, ('TL-Align', 1): 89.5,
            ('CutMix', 2): 80.0}  # seed 2's TL-Align run not done yet
    records = {j.index: dict(top1=top1[j.target, j.seed]) for j in jobs
               if (j.target, j.seed) in top1}
    assert demo.paired_so_far(jobs, records) == \
        'ViT TL-Align − CutMix +0.25 W/L/T 1/1/0'
    records[jobs[-1].index] = dict(error='killed')
    assert demo.paired_so_far(jobs, records).endswith('1/1/0')
