"""``tools/gpu_report.py`` on CPU: the dry run that a GPU run repeats.

The GPU machine is lent for minutes; these tests make sure its one command
runs through (every model and setting, ratios for every TL-Align row, the
budget honoured) before a GPU is at hand.
"""
import collections
import itertools
import json

import pytest
import torch

from tests.tool_scripts import load_tool

# the dry run's rows for one model: CPU has no Triton, so the ViT's ĀY
# paths are the explicit one (its default, narrow heads) and SDPA
SETTINGS = ('cutmix', 'tlalign[explicit]', 'tlalign[sdpa]')


@pytest.fixture
def gpu_report():
    module = load_tool('gpu_report.py')
    yield module
    torch._dynamo.reset()  # the compiled settings' caches stay here


def run(gpu_report, out, argv, clock):
    gpu_report.main(['--device', 'cpu', '--tiny', '--out', str(out), *argv],
                    clock=clock)
    return (json.loads((out / 'gpu_report.json').read_text()),
            (out / 'gpu_report.md').read_text())


@pytest.mark.e2e  # about 15 training steps, half of them compiled
def test_dry_run_writes_every_setting_and_a_failure_does_not_stop_it(
        gpu_report, tmp_path, monkeypatch):
    """Every setting of one model, eager and compiled (reduce-overhead: no
    CUDA graphs on CPU, and the report says why), with its ratios; one
    compiled setting fails (a GPU minute lost to one compile error must
    not lose the rest); the CUDA test cases run by pytest and are read
    back."""
    compile_model, compiled = gpu_report.compile_model, []

    def failing(model, mode, backend):
        compiled.append(type(model).__name__)
        compile_model(model, mode, backend)
        if compiled.count('TLAlignClassifier') == 2:  # the second ĀY path
            def forward(*args, **kwargs):
                raise RuntimeError('inductor says no')
            model.forward = forward
        return model

    cases = tmp_path / 'test_cuda_cases.py'
    cases.write_text('import pytest\n\n\n@pytest.mark.skip(reason="no CUDA")'
                     '\ndef test_on_cuda():\n    pass\n')
    monkeypatch.setattr(gpu_report, 'compile_model', failing)
    monkeypatch.setattr(gpu_report, 'cuda_test_files', lambda: [str(cases)])
    # the clock stopped: the budget never runs out, however slow the machine
    report, table = run(gpu_report, tmp_path, ['--models', 'deit-small',
                        '--modes', 'eager,reduce-overhead'], lambda: 0.)
    rows = {r['setting']: r for r in report['rows']}
    assert sorted(rows) == sorted(s + suffix for s in SETTINGS
                                  for suffix in ('', '+reduce-overhead'))
    failed = rows.pop('tlalign[sdpa]+reduce-overhead')
    assert (failed['error'], failed['reps']) == (
        'RuntimeError: inductor says no', 0)
    assert 'failed: RuntimeError: inductor says no' in table
    for setting, row in rows.items():
        assert row['reps'] == 2 and row['step_s'] > 0, setting
        assert f"| deit-small | {setting} |" in table
        if row['method'] == 'tlalign':
            assert min(row[k] for k in ('step_ratio', 'mem_ratio',
                                        'peak_ratio')) > 0, setting
        if row['mode'] != 'eager':
            assert row['graphs'] >= 1 and row['captured'] == 'no'
            assert row['capture_issues'], setting
    # the package's default path is marked, once per mode
    assert [r['setting'] for r in report['rows'] if r['default_path']] == [
        'tlalign[explicit]', 'tlalign[explicit]+reduce-overhead']
    assert report['budget']['stop'] is None
    assert [c['outcome'] for c in report['cuda_tests']['cases']] == [
        'skipped']


def test_budget_stops_after_the_first_measurement(gpu_report, tmp_path):
    """The report's clock ticks one second a reading, so the 1 s budget is
    spent by the first measurement on any machine; the step timings
    themselves are benchmark.py's. The ĀY paths were found first, each by
    one eager step under ``label_path``: on CPU the package's choice for
    narrow heads (explicit), SDPA forced, no Triton to force; and the
    records' function is the package's again."""
    from tlalign_mm.core import records
    before = records.head_mean_attention
    report, table = run(gpu_report, tmp_path, ['--budget-s', '1'],
                        itertools.count().__next__)
    assert report['budget']['measurements'] == 1
    assert 'stopped: budget of 1 s spent after its first measurement' \
        in table
    assert [(r['model'], r['setting'], r['reps'], r['default_path'])
            for r in report['rows']] == [
        ('deit-small', 'cutmix', 1, False),
        ('deit-small', 'tlalign[explicit]', 0, True),
        ('deit-small', 'tlalign[sdpa]', 0, False)]
    assert records.head_mean_attention is before
    qk, y = torch.randn(2, 1, 2, 3, 8), torch.rand(1, 3, 4)
    with gpu_report.label_path('sdpa'):  # the arguments, handed on as given
        assert torch.equal(records.head_mean_attention(*qk, y)[0],
                           before(*qk, y, impl='sdpa')[0])
    # a model whose blocks compute their own softmax takes no path
    assert gpu_report.path_name(collections.Counter()) == 'softmax'
    # what was not started is listed, not left out
    assert len(report['not_measured']) == 11
    assert 'budget spent' in report['cuda_tests']['outcome']
    # the CUDA test files a GPU run starts (the e2e dry run fakes them)
    assert 'tests/models/test_fused_kernels.py' in gpu_report.cuda_test_files()
