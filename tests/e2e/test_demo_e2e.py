"""The demo config on two processes (gloo, no GPU) through
tools/dist_train.sh. (Train, resume from a path and test through
tools/train.py and tools/test.py: tests/e2e/test_downstream.py and
tests/engine/test_kill_and_resume.py.)"""
import glob
import json
import os
import os.path as osp
import random
import subprocess

import pytest

import tlalign_mm  # noqa: F401  (allow-lists mmengine checkpoint types)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'configs', 'demo',
                  'vit-tiny-p4_1xb64-tlalign_digits.py')
# 32 training images in batches of 16, 4 epochs: 8 iterations.
SMALL = [
    'train_dataloader.dataset.indices=32', 'train_dataloader.batch_size=16',
    'val_dataloader.dataset.indices=32', 'train_cfg.max_epochs=4',
    'train_cfg.val_interval=4', 'default_hooks.checkpoint.interval=1',
    'default_hooks.checkpoint.max_keep_ckpts=-1',
    'default_hooks.logger.interval=1'
]


@pytest.mark.e2e
def test_demo_distributed_two_processes(tmp_path):
    work = str(tmp_path / 'dist')
    env = dict(os.environ, PORT=str(random.randint(29600, 29900)))
    proc = subprocess.run(
        ['bash', 'tools/dist_train.sh', CONFIG, '2', '--work-dir', work,
         '--cfg-options', *SMALL, 'train_dataloader.batch_size=8'],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert 'world_size: 2' in out or "'world_size': 2" in out or \
        'Distributed training: True' in out
    [scalars] = glob.glob(osp.join(work, '*', 'vis_data', 'scalars.json'))
    with open(scalars) as f:
        records = [r for r in map(json.loads, f) if 'loss' in r]
    # 32 images / (2 ranks x 8 per rank) = 2 iterations per epoch.
    assert [r['iter'] for r in records] == list(range(1, 9))
    assert osp.isfile(osp.join(work, 'epoch_4.pth'))
