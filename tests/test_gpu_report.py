"""``tools/gpu_report.py`` on CPU: the dry run that a GPU run repeats.

The GPU machine is lent for minutes; these tests make sure its one command
runs through before a GPU is at hand, and check what the report promises,
not its incidental rows: every planned (model, mode) is measured or listed
as not measured, every TL-Align row sits beside its CutMix row with its
ratios, exactly one row per model and mode is the package's own ĀY path,
a failing setting is reported and the run goes on, the budget holds.
"""
import itertools
import json

import pytest
import torch

from tests.cli import tool_main
from tlalign_mm.core import attention
from tlalign_mm.testing import steps

TINY_VIT_HEAD = 16  # --tiny's DeiT-S: 32 dims over 2 heads


@pytest.fixture
def gpu_report():
    yield tool_main('gpu_report.py')
    torch._dynamo.reset()  # the compiled settings' caches stay here


def run(gpu_report, out, argv, clock):
    gpu_report(['--device', 'cpu', '--tiny', '--out', str(out), *argv],
               clock=clock)
    return (json.loads((out / 'gpu_report.json').read_text()),
            (out / 'gpu_report.md').read_text())


def planned(report):
    """Every (model, mode) the report was asked for."""
    cfg = report['config']
    return set(itertools.product(cfg['models'], cfg['modes']))


def accounted(report):
    return {(r['model'], r['mode']) for r in report['rows']} | {
        (n['model'], n['mode']) for n in report['not_measured']}


@pytest.mark.e2e  # about 15 training steps, half of them compiled
def test_dry_run_writes_every_setting_and_a_failure_does_not_stop_it(
        gpu_report, tmp_path, monkeypatch):
    """One compiled setting fails (a GPU minute lost to one compile error
    must not lose the rest); reduce-overhead has no CUDA graphs on CPU, and
    the report says why."""
    compiled, calls = steps.compiled, []

    def failing(model, *args):
        calls.append(type(model).__name__)
        compiled(model, *args)
        if calls.count('TLAlignClassifier') == 2:  # the second ĀY path
            def forward(*args, **kwargs):
                raise RuntimeError('inductor says no')
            model.forward = forward
        return model

    monkeypatch.setattr(steps, 'compiled', failing)
    # the clock stopped: the budget never runs out, however slow the machine
    report, table = run(gpu_report, tmp_path, ['--models', 'deit-small',
                        '--modes', 'eager,reduce-overhead'], lambda: 0.)
    assert accounted(report) == planned(report) and \
        not report['not_measured'] and report['budget']['stop'] is None
    failed = [r for r in report['rows'] if r['error']]
    assert [(r['error'], r['reps']) for r in failed] == [
        ('RuntimeError: inductor says no', 0)]
    assert 'failed: RuntimeError: inductor says no' in table
    for mode in ('eager', 'reduce-overhead'):
        rows = [r for r in report['rows'] if r['mode'] == mode]
        assert rows[0]['method'] == 'cutmix'  # the reference of the mode
        # one row the package's own path; the others each another path
        [default] = [r for r in rows if r['default_path']]
        paths = [r['path'] for r in rows[1:]]
        assert len(set(paths)) == len(paths) >= 2
        assert default['path'] == ('explicit' if TINY_VIT_HEAD <
                                   attention.EXPLICIT_MAX_HEAD_DIM else 'sdpa')
    for row in report['rows']:
        if row['error']:
            continue
        assert row['reps'] == 2 and row['step_s'] > 0, row['setting']
        assert f"| {row['setting']} " in table
        if row['method'] == 'tlalign':
            assert min(row[k] for k in ('step_ratio', 'mem_ratio',
                                        'peak_ratio')) > 0, row['setting']
        if row['mode'] != 'eager':
            assert row['graphs'] >= 1 and row['captured'] == 'no'
            assert row['capture_issues'], row['setting']


def test_budget_stops_after_the_first_measurement(gpu_report, tmp_path):
    """The report's clock ticks one second a reading, so the 1 s budget is
    spent by the first measurement on any machine; what the budget cut is
    named, row by row or as not measured, and nothing planned is lost."""
    report, table = run(gpu_report, tmp_path, ['--budget-s', '1'],
                        itertools.count().__next__)
    assert report['budget']['measurements'] == 1
    assert 'stopped: budget of 1 s spent after its first measurement' \
        in table
    assert sum(r['reps'] for r in report['rows']) == 1
    assert accounted(report) == planned(report)
    assert all('budget' in n['reason'] for n in report['not_measured'])
    assert report['sync_check']['model_step'].startswith('not run')
