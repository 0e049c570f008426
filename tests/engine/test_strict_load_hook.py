"""StrictLoadHook: a checkpoint that does not fit fails, naming the keys as
they are in the file; a bare state dict cannot be resumed."""
import os
import os.path as osp
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import HOOKS

from tlalign_mm.engine import (
    CheckpointMismatchError,
    StrictLoadHook,
    add_checkpoint_safety_hooks,
    check_resumable,
    check_state_dict,
)

from .tiny_run import write_config, write_images

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


class Net(nn.Module):

    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Linear(4, 8)
        self.head = nn.Linear(8, classes)


def test_fitting_checkpoint_loads_and_module_prefix_is_stripped():
    want, model = Net(), Net()
    state = OrderedDict(
        ('module.' + k, v) for k, v in want.state_dict().items())
    check_state_dict(model, {'state_dict': state}, 'a.pth')
    assert torch.equal(model.head.weight, want.head.weight)


def test_mismatch_names_every_key_as_in_the_file():
    state = Net(classes=5).state_dict()
    state['module.extra.weight'] = torch.zeros(1)  # as saved from DDP
    del state['backbone.bias']
    with pytest.raises(CheckpointMismatchError) as error:
        check_state_dict(Net(), {'state_dict': state}, 'other.pth')
    text = str(error.value)
    assert "Checkpoint 'other.pth' does not fit the model (Net)" in text
    assert 'missing in the checkpoint (1): backbone.bias' in text
    assert 'unexpected in the checkpoint (1): module.extra.weight' in text
    assert ('shape differs (2): head.weight (5, 8) in the checkpoint, '
            '(3, 8) in the model, head.bias (5,) in the checkpoint, (3,) in '
            'the model') in text
    assert '--cfg-options strict_load=False' in text


def test_load_hooks_run_before_shapes_are_compared():
    """A shape the model's own load hook adapts (ViT pos_embed resize) is
    not a mismatch."""
    from mmpretrain.models import VisionTransformer
    small = VisionTransformer(arch=dict(embed_dims=16, num_layers=1,
                                        num_heads=2, feedforward_channels=16),
                              img_size=32, patch_size=8)
    large = VisionTransformer(arch=dict(embed_dims=16, num_layers=1,
                                        num_heads=2, feedforward_channels=16),
                              img_size=64, patch_size=8)
    check_state_dict(large, small.state_dict(), 'small.pth')


def test_bare_state_dict_cannot_be_resumed():
    with pytest.raises(CheckpointMismatchError) as error:
        check_resumable(Net().state_dict(), 'weights.pth')
    text = str(error.value)
    assert "'weights.pth' cannot be resumed: it has no meta, state_dict, " \
        'message_hub' in text
    assert '--cfg-options load_from=weights.pth (without --resume)' in text
    check_resumable({'meta': {'epoch': 1, 'iter': 3}, 'state_dict': {},
                     'message_hub': {}}, 'ok.pth')
    with pytest.raises(CheckpointMismatchError, match=r"meta\['epoch'\]"):
        check_resumable({'meta': {}, 'state_dict': {}, 'message_hub': {}},
                        'x.pth')


def test_tools_add_the_hooks_once_with_the_switch():
    cfg = Config(dict(custom_hooks=[dict(type='EMAHook')]))
    add_checkpoint_safety_hooks(cfg, training=True)
    add_checkpoint_safety_hooks(cfg, training=True)
    types = [h['type'] for h in cfg.custom_hooks]
    assert types == ['EMAHook', 'StrictLoadHook', 'SafeResumeHook']
    cfg = Config(dict(strict_load=False))
    add_checkpoint_safety_hooks(cfg, training=False)
    (hook, ) = cfg.custom_hooks
    assert hook['strict'] is False
    built = HOOKS.build(hook)
    assert isinstance(built, StrictLoadHook) and built.strict is False
    with pytest.raises(TypeError, match='strict_load must be True or False'):
        add_checkpoint_safety_hooks(Config(dict(strict_load='no')), False)


@pytest.mark.e2e
def test_tools_test_refuses_a_wrong_architecture_checkpoint(tmp_path):
    """tools/test.py CONFIG CKPT with a checkpoint of another model exits
    non-zero and names its keys as in the file; strict_load=False runs."""
    data = str(tmp_path / 'data')
    write_images(data)
    config = str(tmp_path / 'tiny.py')
    write_config(config, data)
    # the same ViT with 5 classes and a third block: a different model
    cfg = Config.fromfile(config)
    from mmpretrain.registry import MODELS
    cfg.model.head.num_classes = 5
    cfg.model.backbone.arch.num_layers = 3
    wrong = MODELS.build(cfg.model).state_dict()
    ckpt = str(tmp_path / 'wrong.pth')
    torch.save({'state_dict': wrong, 'meta': {}}, ckpt)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')

    def run(*extra):
        return subprocess.run(
            [sys.executable, osp.join(ROOT, 'tools', 'test.py'), config,
             ckpt, '--work-dir', str(tmp_path / 'test'), *extra], cwd=ROOT,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, timeout=600)

    proc = run()
    assert proc.returncode != 0, proc.stdout[-3000:]
    out = proc.stdout
    assert 'CheckpointMismatchError' in out
    assert 'unexpected in the checkpoint (12): backbone.layers.2.' in out
    assert 'head.layers.head.weight (5, 32) in the checkpoint, (3, 32) in ' \
        'the model' in out
    assert 'backbone.backbone.' not in out
    proc = run('--cfg-options', 'strict_load=False')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 'accuracy/top1' in proc.stdout
