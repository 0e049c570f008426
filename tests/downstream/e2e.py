"""Shared steps of the downstream end-to-end tests: run ``tools/train.py``
and ``tools/test.py`` on a config, and check in-process that the backbone
a Runner builds from that config holds the pretrained tensors."""
import json
import os
import os.path as osp
import subprocess
import sys
from typing import Callable, Dict, Optional

import torch
from mmengine.config import Config

from .tiny import ROOT


def run(args, timeout=600) -> str:
    env = dict(os.environ, OMP_NUM_THREADS='2', MKL_NUM_THREADS='2')
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    return out


def train(config: str, work_dir: str) -> str:
    """``tools/train.py`` without validation (``tools/test.py`` follows)."""
    return run([sys.executable, 'tools/train.py', config, '--work-dir',
                work_dir, '--no-validate'])


def test(config: str, checkpoint: str, work_dir: str) -> str:
    return run([sys.executable, 'tools/test.py', config, checkpoint,
                '--work-dir', work_dir])


def losses(work_dir: str) -> list:
    runs = sorted(d for d in os.listdir(work_dir) if osp.isfile(
        osp.join(work_dir, d, 'vis_data', 'scalars.json')))
    with open(osp.join(work_dir, runs[-1], 'vis_data', 'scalars.json')) as f:
        records = [json.loads(line) for line in f]
    return [r for r in records if 'loss' in r]


def built_backbone(cfg: Config, work_dir: str) -> torch.nn.Module:
    """The backbone of the model a Runner builds from ``cfg``, after the
    Runner's own ``init_weights`` call path."""
    from mmengine.runner import Runner
    cfg = cfg.copy()
    cfg.work_dir = work_dir
    runner = Runner.from_cfg(cfg)
    model = runner.model
    model = getattr(model, 'module', model)
    model.init_weights()
    return model.backbone


def assert_backbone_equals(backbone: torch.nn.Module,
                           pretrained: Dict[str, torch.Tensor],
                           expected: Optional[Callable] = None,
                           new_keys=()) -> int:
    """Every ``backbone.*`` tensor of ``pretrained`` is in ``backbone``,
    bit for bit (or as ``expected(key, tensor)`` says, for tensors a load
    hook resizes); every backbone key is either pretrained or in
    ``new_keys``. Returns the number of tensors compared."""
    got = backbone.state_dict()
    want = {
        k[len('backbone.'):]: v
        for k, v in pretrained.items() if k.startswith('backbone.')
    }
    assert set(got) == set(want) | set(new_keys), (
        sorted(set(got) ^ (set(want) | set(new_keys))))
    for key, value in want.items():
        if expected is not None:
            value = expected(key, value)
        assert torch.equal(got[key].cpu(), value), key
    return len(want)
