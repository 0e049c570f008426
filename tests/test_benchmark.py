"""``tools/benchmark.py --baseline DIR``: two checkouts, each in its own
process (DIR's own ``tools/benchmark.py --worker``), their settings timed
in turns and printed beside each other with ratios to this checkout's
CutMix; here DIR is this checkout, so both sides build the same weights
and save the same bytes for backward."""
import re
import subprocess
import sys

import pytest

from tests.cli import ROOT


@pytest.mark.e2e  # two processes, each building the demo ViT twice
def test_baseline_runs_in_its_own_process_and_is_interleaved():
    out = subprocess.run(
        [sys.executable, 'tools/benchmark.py', '--model', 'demo-vit',
         '--threads', '1', '--reps', '2', '--batch-size', '4', '--modes',
         'cutmix,tlalign,tlalign@baseline', '--baseline', ROOT],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {m[0]: m[1:] for m in re.findall(
        r'\| (\S+) +\| +([\d.]+) \| +([\d.]+) \| +([\d.]+) \| +([\d.]+) \| '
        r'+([\d.]+) \|', out.stdout)}
    assert set(rows) == {'cutmix', 'tlalign', 'cutmix@baseline',
                         'tlalign@baseline'}
    # the same weights and batch on both sides: the same bytes saved
    assert rows['tlalign@baseline'][3] == rows['tlalign'][3]
    assert all(float(r[0]) > 0 for r in rows.values())
