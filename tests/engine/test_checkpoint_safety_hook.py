"""CheckpointSafetyHook: a checkpoint that does not fit fails, naming the
keys; a bare state dict cannot be resumed; the tools add the hooks once,
whatever a config names them. (What a resumed checkpoint may hold is the
loader's schema: ``tests/test_checkpoint_safety.py``.)"""
import os
import os.path as osp
import subprocess
import sys
import types
from collections import OrderedDict

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import HOOKS

from tlalign_mm.checkpoint import (
    CheckpointMismatchError,
    CheckpointSafetyHook,
    LastCheckpointHook,
    add_checkpoint_hooks,
    load_strictly,
    state_dict_of,
)

from .tiny_run import write_config, write_images

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


class Net(nn.Module):

    def __init__(self, classes=3):
        super().__init__()
        self.backbone = nn.Linear(4, 8)
        self.head = nn.Linear(8, classes)


def _runner(model, work_dir, resume=True, load_from='x.pth', hooks=()):
    """What the hooks read of a Runner."""
    return types.SimpleNamespace(
        model=model, work_dir=str(work_dir), hooks=list(hooks),
        _resume=resume, _load_from=load_from,
        _randomness_cfg=dict(diff_rank_seed=False))


def _resumable(model, **extra):
    return dict(meta=dict(epoch=1, iter=3), state_dict=model.state_dict(),
                message_hub=dict(log_scalars={}, runtime_info={},
                                 resumed_keys={}), **extra)


def test_fitting_checkpoint_loads_and_module_prefix_is_stripped():
    want, model = Net(), Net()
    state = OrderedDict(
        ('module.' + k, v) for k, v in want.state_dict().items())
    hook = CheckpointSafetyHook()
    hook.after_load_checkpoint(_runner(model, '.', resume=False),
                               {'state_dict': state})
    assert torch.equal(model.head.weight, want.head.weight)


def test_mismatch_names_every_key():
    state = Net(classes=5).state_dict()
    state['module.extra.weight'] = torch.zeros(1)  # as saved from DDP
    del state['backbone.bias']
    with pytest.raises(CheckpointMismatchError) as error:
        CheckpointSafetyHook().after_load_checkpoint(
            _runner(Net(), '.', resume=False, load_from='other.pth'),
            {'state_dict': state})
    text = str(error.value)
    assert "Checkpoint 'other.pth' does not fit Net" in text
    assert 'missing in the checkpoint (1): backbone.bias' in text
    assert 'unexpected in the checkpoint (1): extra.weight' in text
    assert ('shape differs (2): head.bias (5,) in the checkpoint, (3,) in '
            'the model, head.weight (5, 8) in the checkpoint, (3, 8) in the '
            'model') in text
    assert '--cfg-options strict_load=False' in text


def test_load_hooks_run_before_shapes_are_compared():
    """A shape the model's own load hook adapts (ViT pos_embed resize) is
    not a mismatch, and the resized tensors are loaded."""
    from mmpretrain.models import VisionTransformer
    arch = dict(embed_dims=16, num_layers=1, num_heads=2,
                feedforward_channels=16)
    small = VisionTransformer(arch=arch, img_size=32, patch_size=8)
    large = VisionTransformer(arch=arch, img_size=64, patch_size=8)
    torch.nn.init.normal_(small.cls_token)
    _, _, resized = load_strictly(large, small.state_dict(), 'small.pth')
    assert torch.equal(large.cls_token, small.cls_token)
    assert large.pos_embed.shape == (1, 65, 16)
    with pytest.raises(CheckpointMismatchError, match='shape differs'):
        load_strictly(large, dict(small.state_dict(),
                                  cls_token=torch.zeros(1, 1, 8)), 'x')


def test_keys_a_load_hook_drops_unchanged_are_not_missing():
    """SwinTransformerV2's load hook drops two buffers it rebuilds from its
    window size: its own checkpoint loads strictly; one of another window
    size lists them as missing; a file without a weight still fails."""
    from mmpretrain.models import SwinTransformerV2

    def swin(window_size):
        return SwinTransformerV2(
            arch=dict(embed_dims=8, depths=[1], num_heads=[1],
                      extra_norm_every_n_blocks=0), window_size=window_size,
            img_size=32, out_indices=(0, ))

    own = swin(4)
    state = own.state_dict()
    assert any(k.endswith('relative_coords_table') for k in state)
    assert load_strictly(own, state, 'v2.pth')[0] == []
    with pytest.raises(CheckpointMismatchError, match=r'missing in the '
                       r'checkpoint \(2\): .*relative_coords_table'):
        load_strictly(swin(8), state, 'v2.pth')
    state.pop('norm0.weight')
    with pytest.raises(CheckpointMismatchError,
                       match=r'missing in the checkpoint \(1\): norm0.weight'):
        load_strictly(own, state, 'v2.pth')


def test_a_prefix_and_allowed_keys():
    state = {'backbone.weight': torch.ones(8, 4), 'backbone.bias':
             torch.ones(8), 'head.weight': torch.ones(3, 8)}
    picked = state_dict_of({'state_dict': state}, 'c.pth', 'backbone.')
    assert sorted(picked) == ['bias', 'weight']
    module = nn.Sequential(nn.Linear(4, 8))
    with pytest.raises(CheckpointMismatchError, match='missing in the '
                       r'checkpoint \(2\): 0.bias, 0.weight'):
        load_strictly(module, picked, 'c.pth')
    missing, unexpected, _ = load_strictly(
        module, picked, 'c.pth', allow_missing=['0.*'],
        allow_unexpected=['*'])
    assert missing == ['0.weight', '0.bias'] and \
        sorted(unexpected) == ['bias', 'weight']
    with pytest.raises(CheckpointMismatchError, match="prefix 'neck.'"):
        state_dict_of({'state_dict': state}, 'c.pth', 'neck.')


def test_bare_state_dict_cannot_be_resumed(tmp_path):
    hook = CheckpointSafetyHook()
    with pytest.raises(CheckpointMismatchError) as error:
        hook.after_load_checkpoint(
            _runner(Net(), tmp_path, load_from='weights.pth'),
            Net().state_dict())
    text = str(error.value)
    assert "'weights.pth' cannot be resumed: it has no state_dict, " \
        "message_hub, meta['epoch'], meta['iter']" in text
    assert '--cfg-options load_from=weights.pth (without --resume)' in text
    model = Net()
    hook.after_load_checkpoint(_runner(model, tmp_path), _resumable(model))
    with pytest.raises(CheckpointMismatchError, match=r"meta\['epoch'\]"):
        hook.after_load_checkpoint(_runner(model, tmp_path), dict(
            _resumable(model), meta={}))


@pytest.mark.parametrize('listed, added', [
    ([dict(type='EMAHook')], ['CheckpointSafetyHook', 'LastCheckpointHook']),
    # case 7 of issue 30: the same classes under other names and scopes
    ([dict(type='tlalign_mm.LastCheckpointHook', interval=3)],
     ['CheckpointSafetyHook']),
    ([dict(type='tlalign_mm.CheckpointSafetyHook', strict=False),
      dict(type=LastCheckpointHook)], []),
])
def test_tools_add_each_hook_once_with_the_switch(listed, added):
    """A hook class the config lists already (by any name, scope, or as a
    class) is not added again: its settings, an opt-out included, stay."""
    cfg = Config(dict(default_scope='mmpretrain', custom_hooks=list(listed),
                      last_checkpoint_hook=dict(interval=7)))
    add_checkpoint_hooks(cfg, training=True)
    add_checkpoint_hooks(cfg, training=True)
    assert cfg.custom_hooks[:len(listed)] == listed
    assert [h['type'] for h in cfg.custom_hooks[len(listed):]] == added
    built = [HOOKS.build(dict(h)) for h in cfg.custom_hooks
             if 'EMA' not in str(h['type'])]
    assert len({type(h) for h in built}) == len(built) == 2
    assert next(h for h in built if isinstance(
        h, CheckpointSafetyHook)).strict is (len(listed) < 2)


def test_strict_load_is_type_checked_and_test_adds_no_last_hook():
    cfg = Config(dict(strict_load=False, last_checkpoint_hook=dict()))
    add_checkpoint_hooks(cfg, training=False)
    (hook, ) = cfg.custom_hooks
    built = HOOKS.build(hook)
    assert isinstance(built, CheckpointSafetyHook) and built.strict is False
    with pytest.raises(TypeError, match='strict_load must be True or False'):
        add_checkpoint_hooks(Config(dict(strict_load='no')), False)


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
    assert 'unexpected in the checkpoint (12): backbone.layers.2.' in out
    assert 'Traceback' not in out and 'error: ' in out
    assert 'head.layers.head.weight (5, 32) in the checkpoint, (3, 32) in ' \
        'the model' in out
    assert 'backbone.backbone.' not in out
    proc = run('--cfg-options', 'strict_load=False')
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert 'accuracy/top1' in proc.stdout
