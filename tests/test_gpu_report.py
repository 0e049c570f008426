"""``tools/gpu_report.py`` on CPU: the dry run that a GPU run repeats.

The GPU machine is lent for minutes; these tests make sure its one command
runs through (every model and setting, ratios for every TL-Align row, the
budget honoured) before a GPU is at hand.
"""
import collections
import itertools
import json
import os.path as osp

import pytest
import torch

from tests.tool_scripts import load_tool

# the dry run's rows for one model: CPU has no Triton, so the ViT's ĀY
# paths are the explicit one (its default, narrow heads) and SDPA
SETTINGS = ('cutmix', 'tlalign[explicit]', 'tlalign[sdpa]')
SUFFIX = {'eager': '', 'compile': '+compile'}


def frozen_clock():
    """The report's clock, stopped: its budget never runs out, however
    slow the machine (the budget itself is tested with a ticking clock)."""
    return 0.


@pytest.fixture
def gpu_report():
    module = load_tool('gpu_report.py')
    yield module
    torch._dynamo.reset()  # the compiled settings' caches stay here


def read(out):
    with open(osp.join(out, 'gpu_report.json')) as f:
        report = json.load(f)
    with open(osp.join(out, 'gpu_report.md')) as f:
        table = f.read()
    return report, table


@pytest.mark.e2e
def test_dry_run_writes_every_setting_with_ratios(gpu_report, tmp_path):
    gpu_report.main(['--device', 'cpu', '--tiny', '--models', 'deit-small',
                     '--modes', ','.join(SUFFIX), '--out', str(tmp_path)],
                    clock=frozen_clock)
    report, table = read(tmp_path)
    assert set(report) >= {'environment', 'config', 'rows', 'not_measured',
                           'sync_check', 'cuda_tests', 'budget', 'date'}
    assert set(report['environment']) >= {'gpu', 'torch', 'cuda', 'triton',
                                          'commit'}
    rows = {r['setting']: r for r in report['rows']}
    assert sorted(rows) == sorted(setting + suffix for setting in SETTINGS
                                  for suffix in SUFFIX.values())
    assert len(report['rows']) == len(rows)  # one row each
    for setting, row in rows.items():
        assert row['reps'] == 2, setting
        assert row['step_s'] > 0
        assert f"| deit-small | {setting} |" in table
        if row['method'] == 'tlalign':
            for key in ('step_ratio', 'mem_ratio', 'peak_ratio'):
                assert row[key] > 0, (setting, key)
        if row['mode'] != 'eager':
            assert row['compile_s'] is not None and row['graphs'] >= 1
    # the package's default path is marked, once per mode
    assert [r['setting'] for r in report['rows'] if r['default_path']] == [
        'tlalign[explicit]', 'tlalign[explicit]+compile']
    assert report['not_measured'] == [] and report['budget']['stop'] is None
    assert 'everything planned was measured' in table
    # the targets line counts the 2 default-path TL-Align rows
    assert 'step ≤ 1.05× CutMix in ' in table
    assert 'memory 1.00× in 2 of 2' in table
    # the CUDA cases were collected and, without CUDA, skipped
    tests = report['cuda_tests']
    assert 'tests/models/test_fused_kernels.py' in tests['files']
    assert tests['cases'] and all(c['outcome'] == 'skipped'
                                  for c in tests['cases'])
    assert report['sync_check']['model_step'] == 'not run: needs CUDA'


def test_budget_stops_after_the_first_measurement(gpu_report, tmp_path):
    # The report's clock ticks one second a reading, so the 1 s budget is
    # spent by the first measurement on any machine; the step timings
    # themselves are benchmark.py's.
    gpu_report.main(['--device', 'cpu', '--tiny', '--budget-s', '1',
                     '--out', str(tmp_path)],
                    clock=itertools.count().__next__)
    report, table = read(tmp_path)
    budget = report['budget']
    assert budget['measurements'] == 1
    assert 'first measurement' in budget['stop']
    assert 'stopped: budget of 1 s spent after its first measurement' \
        in table
    measured = [r for r in report['rows'] if r['reps']]
    assert [(r['model'], r['setting'], r['reps']) for r in measured] == [
        ('deit-small', 'cutmix', 1)]
    # what was not started is listed, not left out
    assert len(report['not_measured']) == 11
    assert 'budget spent' in report['cuda_tests']['outcome']
    assert 'targets (the package\'s default path): no TL-Align row ' \
        'measured' in table


def test_label_path_forces_and_names_the_path_then_restores(gpu_report):
    from tlalign_mm.core import attention, records
    before = records.head_mean_attention
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 2, 5, 16, generator=g).bfloat16()
            for _ in range(2))
    labels = torch.rand(2, 5, 3, generator=g).softmax(-1)
    attended = {}
    for path in (None, 'explicit', 'sdpa', 'triton'):
        seen = collections.Counter()
        with gpu_report.label_path(path, seen):
            attended[path], _ = records.Slot(q=q, k=k).attend(labels)
        # CPU: narrow heads take the explicit path by default; no Triton,
        # so forcing it does not apply (the default path runs)
        assert gpu_report.path_name(seen) == {
            None: 'explicit', 'explicit': 'explicit', 'sdpa': 'sdpa',
            'triton': 'explicit'}[path]
    torch.testing.assert_close(attended['sdpa'], attended[None])
    torch.testing.assert_close(
        attended[None], attention.head_mean_attention(q, k, labels)[0])
    assert records.head_mean_attention is before
    assert gpu_report.path_name(collections.Counter()) == 'softmax'


@pytest.mark.e2e  # about 15 training steps, two compiled
def test_a_failing_setting_is_reported_and_the_run_goes_on(gpu_report,
                                                          tmp_path,
                                                          monkeypatch):
    """A GPU minute lost to one compile error must not lose the rest."""
    compile_model = gpu_report.compile_model

    def failing(model, mode, backend):
        compile_model(model, mode, backend)
        if type(model).__name__ == 'TLAlignClassifier':
            def forward(*args, **kwargs):
                raise RuntimeError('inductor says no')
            model.forward = forward
        return model

    monkeypatch.setattr(gpu_report, 'compile_model', failing)
    gpu_report.main(['--device', 'cpu', '--tiny', '--models', 'deit-small',
                     '--modes', 'reduce-overhead,eager', '--no-tests',
                     '--out', str(tmp_path)], clock=frozen_clock)
    report, table = read(tmp_path)
    rows = {r['setting']: r for r in report['rows']}
    for setting in ('tlalign[explicit]+reduce-overhead',
                    'tlalign[sdpa]+reduce-overhead'):
        assert rows[setting]['error'] == 'RuntimeError: inductor says no'
        assert rows[setting]['reps'] == 0
    assert 'failed: RuntimeError: inductor says no' in table
    # no CUDA graphs on CPU: the report says why
    for setting in ('cutmix', 'tlalign[explicit]', 'tlalign[sdpa]'):
        row = rows[setting + '+reduce-overhead']
        assert row['captured'] == 'no' and row['capture_issues']
    # the phase after it is measured
    assert rows['tlalign[explicit]']['reps'] == 2
    assert rows['tlalign[explicit]']['step_ratio'] > 0


def test_cudagraph_skip_reasons_are_collected(gpu_report):
    """Inductor says why it does not capture CUDA graphs through one
    function, which its modules import by name: each call is collected."""
    import importlib
    callers = [importlib.import_module(f'torch._inductor.{name}')
               for name in ('cudagraph_utils', 'compile_fx', 'output_code',
                            'cudagraph_trees')]
    before = [m.log_cudagraph_skip_and_bump_counter for m in callers]
    reasons = []
    with gpu_report.cudagraph_skips(reasons):
        for i, module in enumerate(callers):
            module.log_cudagraph_skip_and_bump_counter(f'reason {i}')
    assert reasons == [f'reason {i}' for i in range(len(callers))]
    assert [m.log_cudagraph_skip_and_bump_counter for m in callers] == before
