"""The hooks: a checkpoint that does not fit fails naming the keys, a bare
state dict cannot be resumed, the tools add each hook once whatever a
config names it (LastCheckpointHook to every training run), arguments are
checked, last.pth after so many minutes, exact resume only with the
mmengine it was checked against. (What a file may hold:
``test_checkpoint_safety.py``; kill and resume:
``test_kill_and_resume.py``.)"""
import types

import mmengine
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import HOOKS

from tests.cli import ROOT
from tlalign_mm.checkpoint import CheckpointMismatchError as Mismatch
from tlalign_mm.checkpoint import CheckpointSafetyHook as Safety
from tlalign_mm.checkpoint import LastCheckpointHook as Last
from tlalign_mm.checkpoint import add_checkpoint_hooks as add_hooks
from tlalign_mm.checkpoint import hooks as hooks_module
from tlalign_mm.checkpoint import load_strictly, mmengine_adapter


def _load(hook, checkpoint, model=None, resume=False, source='x.pth'):
    hook.after_load_checkpoint(types.SimpleNamespace(
        model=model, _resume=resume, _load_from=source, _randomness_cfg={}),
        checkpoint)


def test_a_checkpoint_that_does_not_fit_names_every_key():
    want, model = (nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 3))
                   for _ in range(2))
    _load(Safety(), {'state_dict': {  # as saved from DDP
        'module.' + k: v for k, v in want.state_dict().items()}}, model)
    assert torch.equal(model[1].weight, want[1].weight)
    state = dict(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 5)).state_dict(
    ), extra=torch.zeros(1))
    del state['0.bias']
    with pytest.raises(Mismatch, match="'o.pth' does not fit Sequential:.*\n"
                       r'  missing in the checkpoint \(1\): 0.bias\n  unexp'
                       r'ected in the checkpoint \(1\): extra\n  shape diff'
                       r'ers \(2\): 1.bias \(5,\) in the checkpoint, \(3,\) '
                       r'in the model, 1.weight \(5, 8\).*\n.*strict_load'):
        _load(Safety(), {'state_dict': state}, model,
              source='o.pth')


def test_keys_a_load_hook_drops_unchanged_are_not_missing():
    """SwinTransformerV2 drops two buffers it rebuilds from its window
    size: one of another window size lists them as missing. (Its own
    checkpoint loads strictly: tests/models/test_every_backbone.py::
    test_recorded_backbone_is_the_plain_one[Swin V2 padded, box].)"""
    from mmpretrain.models import SwinTransformerV2
    swin = [SwinTransformerV2(arch=dict(
        embed_dims=8, depths=[1], num_heads=[1], extra_norm_every_n_blocks=0),
        window_size=w, img_size=32, out_indices=(0, )) for w in (4, 8)]
    with pytest.raises(Mismatch, match=r'missing in the checkpoint \(2\): '
                       r'.*relative_coords_table'):
        load_strictly(swin[1], swin[0].state_dict(), 'v2.pth')


def test_a_bare_state_dict_cannot_be_resumed():
    model = nn.Linear(2, 2)
    with pytest.raises(Mismatch, match=(
            r"'w.pth' cannot be resumed: it has no state_dict, message_hub, "
            r"meta\['epoch'\], meta\['iter'\] \(weights only\). To start a "
            'new run from its weights: tools/train.py CONFIG --cfg-options '
            r'load_from=w.pth \(without --resume\)')):
        _load(Safety(), model.state_dict(), model, True, 'w.pth')
    _load(Safety(), dict(meta=dict(epoch=1, iter=3), state_dict=(
        model.state_dict()), message_hub={}), model, resume=True)


@pytest.mark.parametrize('listed, training, added', [
    ([dict(type='EMAHook')], True, ['CheckpointSafetyHook',
                                    'LastCheckpointHook']),
    ([dict(type='EMAHook')], False, ['CheckpointSafetyHook']),
    # issue 30, case 7: the same classes under other names and scopes
    ([dict(type='tlalign_mm.LastCheckpointHook', interval=3)], True,
     ['CheckpointSafetyHook']),
    ([dict(type='tlalign_mm.CheckpointSafetyHook', strict=False),
      dict(type=Last)], True, [])])
def test_tools_add_each_hook_once(listed, training, added):
    """A hook class the config lists (any name, scope, or the class) is not
    added again: its settings, an opt-out included, stay."""
    cfg = Config(dict(default_scope='mmpretrain', custom_hooks=list(listed),
                      last_checkpoint_hook=dict(interval=7)))
    for _ in range(2):
        add_hooks(cfg, training)
    assert cfg.custom_hooks[:len(listed)] == listed
    assert [h['type'] for h in cfg.custom_hooks[len(listed):]] == added
    hooks = [HOOKS.build(dict(h)) for h in cfg.custom_hooks
             if h['type'] != 'EMAHook']
    assert next(h for h in hooks if isinstance(
        h, Safety)).strict is (len(listed) < 2)
    with pytest.raises(TypeError, match='strict_load must be True or False'):
        add_hooks(Config(dict(strict_load='no')), training)


@pytest.mark.parametrize('setting, added', [
    ({}, dict(type='LastCheckpointHook', _scope_='tlalign_mm')),
    (dict(last_checkpoint_hook=dict(minutes=2)), dict(
        type='LastCheckpointHook', _scope_='tlalign_mm', minutes=2)),
    (dict(last_checkpoint_hook=None), None)])
def test_every_training_run_saves_last_by_default(setting, added):
    """Every config that trains (demo, small-data, transfer, UperNet,
    Cascade) saves last.pth every 10 minutes and on Ctrl-C, not only the
    ImageNet configs (issue 41); ``last_checkpoint_hook = None`` opts
    out."""
    cfg = add_hooks(Config(dict(default_scope='mmpretrain', **setting)),
                    training=True)
    assert cfg.custom_hooks[1:] == ([added] if added else [])
    if added:
        hook = HOOKS.build(dict(added))
        assert (hook.every, hook.minutes) == (None, setting.get(
            'last_checkpoint_hook', {}).get('minutes', 10))


@pytest.mark.parametrize('kwargs', [
    dict(interval=0), dict(interval=2.5), dict(minutes=0),
    dict(minutes='5'), dict(minutes=True), dict(filename='sub/last.pth'),
    dict(filename='last.ckpt')])
def test_last_checkpoint_hook_arguments_are_checked(kwargs):
    with pytest.raises(ValueError, match=f'{next(iter(kwargs))} must be a'):
        Last(**kwargs)


def test_last_checkpoint_hook_saves_once_minutes_have_passed(monkeypatch):
    """At the end of the first iteration ``minutes`` after the last save
    (the clock restarts at each save), and every ``interval`` iterations;
    nothing else is read per iteration (no host-device sync)."""
    clock = [0.0]
    monkeypatch.setattr(hooks_module.time, 'monotonic', lambda: clock[0])
    hook, saved = Last(interval=5, minutes=1), []
    monkeypatch.setattr(hook, '_save_checkpoint',
                        lambda runner: saved.append(runner.iter + 1))
    runner = types.SimpleNamespace(iter=0, logger=types.SimpleNamespace(
        info=lambda message: None))
    hook._restart_clock()
    for runner.iter, clock[0] in enumerate(
            [10, 59, 61, 62, 90, 119, 122, 130, 151, 160]):
        hook.after_train_iter(runner, 0)
    # 61 s; 5 iterations (at 90 s: the next is due at 150 s); 151 s; 10
    assert saved == [3, 5, 9, 10]


def test_resumable_runtime_composes_with_a_config_that_has_hooks(tmp_path):
    """Beside the demo config's own custom_hooks: last.pth every 500."""
    (tmp_path / 'c.py').write_text(
        f"_base_ = ['{ROOT}/configs/demo/vit-tiny-p4_1xb64-tlalign_digits.py'"
        f", '{ROOT}/configs/_base_/resumable_runtime.py']")
    cfg = add_hooks(Config.fromfile(tmp_path / 'c.py'), True)
    assert cfg.custom_hooks[1:] == [
        dict(type='CheckpointSafetyHook', _scope_='tlalign_mm', strict=True),
        dict(type='LastCheckpointHook', _scope_='tlalign_mm', interval=500)]


def test_another_mmengine_resumes_as_mmengine_does(monkeypatch):
    """Only exact resume uses mmengine's private API: with another release
    a resume is mmengine's own, with a warning saying so."""
    logged = []
    mmengine_adapter.install()  # as the tools
    monkeypatch.setattr(mmengine_adapter, 'print_log',
                        lambda message, **kwargs: logged.append(message))
    for version, exact in (('0.11.0', False), (mmengine.__version__, True)):
        monkeypatch.setattr(mmengine, '__version__', version)
        hook = Last()
        _load(hook, dict(meta=dict(epoch=1, iter=3)), resume=True)
        assert (hook._pending is not None) == exact
    (message, ) = logged
    assert 'Exact resume is off (mmengine 0.11.0, not 0.10.7)' in message
