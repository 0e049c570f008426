"""tools/gpu_bootstrap/run_on_gpu.sh installs the wheels into a fresh
private folder, first on PYTHONPATH (issue 30, case 8: a fixed
``/tmp/site`` could hold anyone's modules)."""
import os
import os.path as osp
import shutil
import stat
import subprocess

import pytest

from tests.cli import ROOT


@pytest.mark.e2e
def test_the_wheels_go_to_a_fresh_private_folder(tmp_path):
    script = tmp_path / 'tools' / 'gpu_bootstrap' / 'run_on_gpu.sh'
    script.parent.mkdir(parents=True)
    shutil.copy(osp.join(ROOT, 'tools', 'gpu_bootstrap', 'run_on_gpu.sh'),
                script)
    (tmp_path / '.gpu_wheels').mkdir()
    (tmp_path / '.gpu_wheels' / 'x.whl').write_bytes(b'')
    python = tmp_path / 'python'  # records how it is called
    python.write_text('#!/bin/sh\necho "$PYTHONPATH $*" >> "$LOG"\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    env.update(PYTHON=str(python), LOG=str(tmp_path / 'log'),
               OUT=str(tmp_path / 'out'))
    sites = []
    for _ in range(2):
        subprocess.run(['bash', str(script)], env=env, check=True,
                       timeout=60)
        pip, report = (tmp_path / 'log').read_text().splitlines()[-2:]
        site = pip.split('--target ')[1].split()[0]
        assert report.split()[0] == site and 'gpu_report.py' in report
        assert stat.S_IMODE(os.stat(site).st_mode) == 0o700
        sites.append(site)
    assert sites[0] != sites[1] and '/tmp/site' not in sites
