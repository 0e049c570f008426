"""tools/run_demo.py on a short job (ViT, two seeds, two epochs on part of
the data): what it says before it starts, the summary files and the
picture beside the recorded evidence, ``--summarize`` of the work dir as it
finds it, and that a run is deterministic (same seed, bit-identical
weights) whether it ran in the job's forked worker or alone through
tools/train.py. Then its command line: a mistake is one ``error:`` line
before anything runs, and ``--help`` imports none of the libraries."""
import json
import os
import os.path as osp
import re
import shutil
import subprocess
import sys

import pytest
import torch

import tlalign_mm  # noqa: F401  (allow-lists mmengine checkpoint types)
from tests.cli import tool_main
from tlalign_mm.apis import demo

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
#: the digits' recipe (30 epochs, 3 of warm-up)
DIGITS = demo.Recipe(30, 3)
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
def test_summary_files_and_picture(job, run_demo_main, capsys):
    work, out = job
    # before it starts: the runs, their time here, the full evidence
    plan = out[:out.index('Logs: ')]
    assert '4 runs (ViT x CutMix, TL-Align x seeds 0 1, 2 epochs each), 2 ' \
        'at a time: about ' in plan
    assert 'The full evidence, 20 seeds per cell (40 runs, about ' in plan
    assert 'tools/run_demo.py --full --models ViT --epochs 2' in plan
    with open(osp.join(work, 'summary.json')) as f:
        summary = json.load(f)
    assert summary['seeds'] == [0, 1] and summary['epochs'] == 2
    assert summary['estimate_s'] > 0
    runs = summary['runs']
    assert sorted((r['target'], r['seed']) for r in runs) == [
        ('CutMix', 0), ('CutMix', 1), ('TL-Align', 0), ('TL-Align', 1)]
    for r in runs:
        assert r['val_epochs'] == [2] and 0 <= r['top1'] <= 100
        assert 0 <= r['label_shift']['mean_abs'] <= 1
        assert r['label_shift']['num_images'] == 64
        assert r['label_shift']['boxes'] > 1  # 8 batches of 8, a box each
        assert r['wall_s'] > 0
        # what it ran with, for --summarize to compare
        assert r['epochs'] == 2 and r['code'] == demo.code_version()
        assert r['job_options'] == demo.epoch_options(2, DIGITS) + SMALL
        assert demo.settings(r)['row_options'] == []
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
    assert 'the job took' in out and '(estimated ' in out
    assert 'Per run: ' in out and 'ms per iteration' in out
    assert all(r['iters'] == 4 for r in runs)  # 2 epochs of 2 batches

    # beside the recorded full evidence: this job, the same seeds there,
    # all twenty, and the other model
    assert [(r['model'], r['what'], r['seeds']) for r in
            summary['recorded']] == [
        ('ViT', 'this job', [0, 1]), ('ViT', 'recorded, same seeds', [0, 1]),
        ('ViT', 'recorded', list(range(20))),
        ('SL-ViT', 'recorded', list(range(20))),
        ('ViT-c24', 'recorded', list(range(20)))]
    assert 'Beside the recorded full evidence' in md
    assert re.search(r'^\| ViT +\| recorded +\| 0–19 +\| 89\.47 ± 4\.01 ', md,
                     flags=re.M)
    headline = out[out.index(md.strip()) + len(md.strip()):]
    assert f'ViT: TL-Align − CutMix {demo._ci(paired)} points (95% CI, ' \
        'paired t over 2 seeds)' in headline
    assert 'moved the target by' in headline
    assert 'Recorded over 20 seeds: -1.57 [-4.75, +1.61], W/L/T 11/9/0' \
        in headline
    assert '2 seeds give a wide interval' in headline

    # the picture: one model, two panels, and the intervals beside the
    # recorded ones (7.2 x 6.6 inches at 100 dpi)
    import matplotlib.image
    png = matplotlib.image.imread(osp.join(work, 'summary.png'))
    assert png.shape[:2] == (660, 720)
    assert png[..., :3].std() > 0.05  # not blank

    # --summarize finds the runs by itself, says what it read, and writes
    # the same numbers (and the job's wall time: they are its runs)
    capsys.readouterr()
    run_demo_main(['--work-dir', work, '--summarize'])
    said = capsys.readouterr().out
    assert said.startswith(f'Reading the runs in {work}')
    assert 'Read 4 runs: ViT x CutMix, TL-Align x seeds 0 1.' in said
    with open(osp.join(work, 'summary.json')) as f:
        again = json.load(f)
    assert again['models'] == summary['models']
    assert again['wall_s'] == summary['wall_s']
    assert again['recorded'] == summary['recorded']


@pytest.mark.e2e
def test_summarize_a_partial_job_and_refuse_two_passes(job, run_demo_main,
                                                       tmp_path, capsys):
    """Issue 41: after a partial job (seed 1's TL-Align run missing),
    ``--summarize`` with no other option reads what is there and pairs the
    complete seeds; issue 39: a run of another pass (--epochs 3) among them
    is one ``error:`` line naming the setting, and nothing is written."""
    work = str(tmp_path / 'demo')
    shutil.copytree(job[0], work)
    os.remove(osp.join(work, 'summary.json'))
    shutil.rmtree(osp.join(work, 'vit_tl-align_seed1'))
    capsys.readouterr()
    out = run_demo_main(['--work-dir', work, '--summarize'])
    said = capsys.readouterr().out
    assert 'Read 3 runs: ViT x CutMix, TL-Align x seeds 0 1.' in said
    assert 'ViT: seeds 1 left out (not every target has finished)' in said
    assert out['summary']['ViT']['paired']['TL-Align']['seeds'] == [0]
    assert '2 runs read from their work dirs' in out['markdown']

    path = osp.join(work, 'vit_cutmix_seed1', 'run.json')
    with open(path) as f:
        record = json.load(f)
    record.update(epochs=3, job_options=demo.epoch_options(3, DIGITS) +
                  SMALL)
    with open(path, 'w') as f:
        json.dump(record, f)
    os.remove(osp.join(work, 'summary.json'))
    with pytest.raises(SystemExit) as error:
        run_demo_main(['--work-dir', work, '--summarize'])
    message = str(error.value)
    assert message.startswith(f'error: the runs in {work} come from passes '
                              'with different settings: --epochs differs (2 '
                              'in vit_cutmix_seed0 and 1 more; 3 in '
                              'vit_cutmix_seed1)')
    assert 'ViT CutMix epochs differs (2 in vit_cutmix_seed0; 3 in ' \
        'vit_cutmix_seed1)' in message
    assert 'job_options differs' in message and '\n' not in message
    assert not osp.exists(osp.join(work, 'summary.json'))


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


def test_epochs_early_epoch_and_options():
    """--epochs scales the schedule (the recipe's warm-up keeps its share,
    at least 1 epoch) or fails clearly; the early epoch is a third of the
    way."""
    assert demo.epoch_options(None, DIGITS) == []
    for of, epochs, warmup in ((DIGITS, 30, 3), (DIGITS, 10, 1),
                               (DIGITS, 2, 1), (demo.Recipe(60, 6), 30, 3),
                               (demo.Recipe(60, 12), 30, 6)):
        assert demo.epoch_options(epochs, of) == [
            f'train_cfg.max_epochs={epochs}', f'param_scheduler.0.end='
            f'{warmup}', f'param_scheduler.1.begin={warmup}']
    with pytest.raises(demo.JobError, match='at least 2 epochs'):
        demo.epoch_options(1, DIGITS)
    with pytest.raises(demo.JobError, match='not a warm-up'):
        demo.epoch_options(10, demo.Recipe(30, None))
    assert demo.early_epoch([dict(val_epochs=list(range(2, 31, 2)))] *
                            2) == 10
    assert demo.early_epoch([dict(val_epochs=[2])]) is None


@pytest.mark.parametrize('argv, message', [
    (['--variants', 'x.py', '--models', 'ViT'], 'leave out --models'),
    (['--jobs', '0'], '--jobs must be at least 1'),
    (['--epochs', '1'], 'a run needs at least 2 epochs'),
    (['--seeds', '1', '1'], '--seeds repeats a seed'),
    (['--full', '--seeds', '0'], '--full is seeds 0-19'),
    (['--models', 'DeiT'], "invalid choice: 'DeiT'"),
    (['--seeds', 'x'], "invalid int value: 'x'"),
    (['--variants', 'missing.py'], '--variants missing.py: no such file'),
    (['--cfg-options', 'model.x'], "takes KEY=VALUE, got ['model.x']"),
    (['--record', '.'], 'is a directory'),
])
def test_a_mistake_in_the_options_is_one_error_line(run_demo_main, capsys,
                                                    argv, message):
    """Issue 41: exit status 1 and one line, not the usage block, before
    anything is imported or written."""
    with pytest.raises(SystemExit) as error:
        run_demo_main(argv)
    assert error.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith('error: ') and err.count('\n') == 1, err
    assert message in err


@pytest.mark.e2e
def test_a_config_mistake_is_one_line_before_any_run(run_demo_main,
                                                     tmp_path):
    """A run shorter than the configs' warm-up (the demo configs' 3
    epochs; --epochs would shrink it) is refused when the configs are
    checked, before any run: no run folder, no log."""
    work = str(tmp_path / 'demo')
    with pytest.raises(SystemExit) as error:
        run_demo_main(['--models', 'ViT', '--seeds', '0', '--work-dir', work,
                       '--cfg-options', 'train_cfg.max_epochs=2'])
    message = str(error.value)
    assert message.startswith('error: ViT CutMix (configs/demo/vit-tiny-p4_'
                              '1xb64-cutmix_digits.py --cfg-options '
                              'train_cfg.max_epochs=2): '
                              'param_scheduler.1 (CosineAnnealingLR) begins')
    assert 'Traceback' not in message
    assert not osp.exists(work) or os.listdir(work) == []


@pytest.mark.e2e
def test_help_is_quick_and_says_what_it_refers_to():
    """Issue 41: ``--help`` imports neither torch nor the package (it took
    7-16 s), ends its sentences, and describes the --variants format it
    refers to."""
    code = ('import runpy, sys\n'
            "sys.argv = ['tools/run_demo.py', '--help']\n"
            'try:\n'
            "    runpy.run_path('tools/run_demo.py', run_name='__main__')\n"
            'except SystemExit:\n'
            '    pass\n'
            "print(sorted({'torch', 'tlalign_mm', 'mmengine', 'mmpretrain'} &"
            ' set(sys.modules)))\n')
    out = run([sys.executable, '-c', code])
    assert out.rstrip().endswith('[]'), out[-300:]
    description = out[out.index('The main job'):out.index('options:')]
    for paragraph in description.strip().split('\n\n'):
        text = paragraph.strip()
        assert text.endswith(('.', ')')) or 'tools/run_demo.py' in text, text
    for key in ('`name`', '`model`', '`options`', '`tlalign_options`'):
        assert key in description
    assert 'see above' not in out
    assert 'the file\'s format is described above' in out
    assert 'the full evidence: ViT, SL-ViT, ViT-c24, seeds 0-19' in out


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
    with pytest.raises(demo.JobError, match=message):
        demo.read_variants(str(path))
    with pytest.raises(demo.JobError, match='no such file'):
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
