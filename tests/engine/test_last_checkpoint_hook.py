"""LastCheckpointHook: built from config dicts, on in every ImageNet config,
its arguments checked. The kill-and-resume behaviour is
``test_kill_and_resume.py``."""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.registry import HOOKS

from tlalign_mm.engine import LastCheckpointHook

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
IMAGENET = sorted(glob.glob(osp.join(ROOT, 'configs', 'tlalign', '*.py')))


def test_builds_from_a_config_dict_in_any_scope():
    hook = HOOKS.build(dict(type='LastCheckpointHook',
                            _scope_='tlalign_mm.engine', interval=7))
    assert isinstance(hook, LastCheckpointHook) and hook.interval == 7
    assert hook.filename == 'last.pth' and hook.priority == 'VERY_LOW'


@pytest.mark.parametrize('kwargs, message', [
    (dict(interval=0), 'interval must be a positive int'),
    (dict(interval=2.5), 'interval must be a positive int'),
    (dict(filename='sub/last.pth'), 'filename must be a file name'),
    (dict(filename='last.ckpt'), 'filename must be a file name'),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LastCheckpointHook(**kwargs)


@pytest.mark.parametrize('path', IMAGENET, ids=osp.basename)
def test_every_imagenet_config_saves_last_every_500_iterations(path):
    cfg = Config.fromfile(path)
    hooks = [h for h in cfg.get('custom_hooks', [])
             if h['type'] == 'LastCheckpointHook']
    assert hooks == [dict(type='LastCheckpointHook',
                          _scope_='tlalign_mm.engine', interval=500)]
    if osp.basename(path) in ('deit-base_16xb64_in1k_cutmix.py',
                              'deit-base_16xb64_in1k_tlalign.py'):
        # mmpretrain's DeiT-B recipe: its EMA kept beside it
        assert [h['type'] for h in cfg.custom_hooks] == [
            'EMAHook', 'LastCheckpointHook']
