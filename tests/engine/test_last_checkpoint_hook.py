"""LastCheckpointHook: built from config dicts, on in every ImageNet config
(and in any config that adds ``configs/_base_/resumable_runtime.py``), its
arguments checked. The kill-and-resume behaviour is
``test_kill_and_resume.py``."""
import glob
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.registry import HOOKS

from tlalign_mm.checkpoint import LastCheckpointHook, add_checkpoint_hooks

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
IMAGENET = sorted(glob.glob(osp.join(ROOT, 'configs', 'tlalign', '*.py')))


def test_builds_from_a_config_dict_in_any_scope():
    hook = HOOKS.build(dict(type='LastCheckpointHook',
                            _scope_='tlalign_mm', interval=7))
    assert isinstance(hook, LastCheckpointHook) and hook.interval == 7
    assert hook.filename_tmpl == 'last.pth' and hook.priority == 'VERY_LOW'


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
    cfg = add_checkpoint_hooks(Config.fromfile(path), training=True)
    hooks = [h for h in cfg.get('custom_hooks', [])
             if h['type'] == 'LastCheckpointHook']
    assert hooks == [dict(type='LastCheckpointHook',
                          _scope_='tlalign_mm', interval=500)]
    if osp.basename(path) in ('deit-base_16xb64-cutmix_in1k.py',
                              'deit-base_16xb64-tlalign_in1k.py'):
        # mmpretrain's DeiT-B recipe: its EMA kept beside it
        assert [h['type'] for h in cfg.custom_hooks] == [
            'EMAHook', 'LastCheckpointHook', 'CheckpointSafetyHook']


def test_resumable_runtime_composes_with_a_config_that_has_hooks(tmp_path):
    """Hole 9: the base file with the demo config (which has its own
    custom_hooks) failed with mmengine's duplicate-key error."""
    config = tmp_path / 'demo_resumable.py'
    config.write_text(f"""_base_ = [
    {osp.join(ROOT, 'configs', 'demo',
              'vit-tiny-p4_1xb64-tlalign_digits.py')!r},
    {osp.join(ROOT, 'configs', '_base_', 'resumable_runtime.py')!r},
]
""")
    cfg = add_checkpoint_hooks(Config.fromfile(str(config)), training=True)
    assert [h['type'] for h in cfg.custom_hooks] == [
        'LabelDriftHook', 'CheckpointSafetyHook', 'LastCheckpointHook']
    assert cfg.custom_hooks[-1]['interval'] == 500
