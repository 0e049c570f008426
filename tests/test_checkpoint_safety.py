"""OpenMMLab checkpoints load with ``weights_only=True``; malicious ones don't.

The benign checkpoint is assembled from the real mmengine objects a Runner
saves (``MessageHub`` with ``HistoryBuffer``s, numpy scalars, an optimizer,
``OneCycleLR`` state, mmseg/mmdet-style ``dataset_meta``) and written by
:func:`mmengine.runner.save_checkpoint`. A full Runner train/resume cycle is
covered by ``tests/e2e/test_train_resume.py``.
"""
import pickle

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.model import BaseModule
from mmengine.optim.scheduler import OneCycleLR
from mmengine.runner import load_checkpoint, save_checkpoint
from mmengine.runner.checkpoint import CheckpointLoader, _load_checkpoint

import tlalign_mm  # noqa: F401  applies allow_openmmlab_checkpoints()
from tlalign_mm.checkpoint_safety import (
    UnsafeCheckpointError,
    allow_openmmlab_checkpoints,
    load_from_local_weights_only,
)


class TinyNet(BaseModule):

    def __init__(self, init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).mean(dim=(2, 3)))


def _runner_like_checkpoint(model):
    """What ``Runner.save_checkpoint`` puts in a checkpoint, built for real."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = OneCycleLR(optimizer, eta_max=1e-2, total_steps=10)
    model(torch.randn(2, 3, 6, 6)).sum().backward()
    optimizer.step()
    scheduler.step()

    hub = MessageHub.get_instance('test_checkpoint_safety')
    for i in range(3):
        hub.update_scalar('train/loss', 1.0 / (i + 1))
        hub.update_scalar('train/lr', 1e-3)
    hub.update_info('eta', np.float64(12.5))  # as the IterTimerHook does
    hub.update_info('best_score', np.float32(15.76))  # mmseg IoUMetric
    hub.update_info('iter', 3)

    meta = dict(
        epoch=1,
        iter=3,
        seed=np.int64(42),
        mmengine_version='0.10.7',
        dataset_meta=dict(
            classes=('road', 'car', 'person'),
            palette=[[128, 64, 128], [0, 0, 142], [220, 20, 60]],
            label_map=None,
            reduce_zero_label=False),
        class_weights=np.array([0.5, 1.0, 2.0], dtype=np.float32),
        counts=np.arange(3, dtype=np.int32),
        valid=np.bool_(True),
        names=np.array(['road', 'car', 'person']),
    )
    return dict(
        meta=meta,
        state_dict=model.state_dict(),
        message_hub=hub.state_dict(),
        optimizer=optimizer.state_dict(),
        param_schedulers=[scheduler.state_dict()])


@pytest.fixture
def benign_ckpt(tmp_path):
    model = TinyNet()
    path = str(tmp_path / 'iter_3.pth')
    save_checkpoint(_runner_like_checkpoint(model), path)
    return path, model


class CreatesFile:
    """Unpickling this calls ``open(target, 'w')``, creating ``target``."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, 'w'))


class _Builtins:
    """Unpickles to the ``builtins`` module via ``getattr(getattr, ...)``."""

    def __reduce__(self):
        return (getattr, (getattr, '__self__'))


class _Exec:

    def __reduce__(self):
        return (getattr, (_Builtins(), 'exec'))


class GetattrChain:
    """RCE through ``builtins.getattr`` if that were allow-listed as is.

    Every global it names is one a real mmengine checkpoint needs
    (``builtins.getattr``) or torch allows by default
    (``torch._tensor._rebuild_from_type_v2``, which calls its first argument).
    """

    def __init__(self, target):
        self.code = f'open({str(target)!r}, "w").close()'

    def __reduce__(self):
        return (torch._tensor._rebuild_from_type_v2,
                (_Exec(), torch.Tensor, (self.code, ), {}))


def test_allow_list_is_idempotent_and_registers_local_scheme():
    allow_openmmlab_checkpoints()
    allow_openmmlab_checkpoints()
    assert CheckpointLoader._get_checkpoint_loader('some/local.pth') is \
        load_from_local_weights_only


def test_runner_checkpoint_has_no_unsafe_globals(benign_ckpt):
    path, _ = benign_ckpt
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []


def test_runner_checkpoint_loads_weights_only(benign_ckpt):
    path, model = benign_ckpt
    ckpt = _load_checkpoint(path, map_location='cpu')

    meta = ckpt['meta']
    assert meta['iter'] == 3 and meta['seed'] == 42
    assert meta['dataset_meta']['classes'] == ('road', 'car', 'person')
    assert meta['dataset_meta']['palette'][2] == [220, 20, 60]
    assert meta['class_weights'].dtype == np.float32
    assert meta['counts'].dtype == np.int32
    assert meta['names'].tolist() == ['road', 'car', 'person']

    hub_state = ckpt['message_hub']
    loss = hub_state['log_scalars']['train/loss']
    assert isinstance(loss, HistoryBuffer)
    assert loss.current() == pytest.approx(1 / 3)
    assert loss.mean() == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert isinstance(hub_state['runtime_info']['best_score'], np.float32)

    hub = MessageHub.get_instance('test_checkpoint_safety_resumed')
    hub.load_state_dict(hub_state)
    assert hub.get_info('iter') == 3
    assert hub.get_scalar('train/lr').current() == pytest.approx(1e-3)

    assert ckpt['param_schedulers'][0]['anneal_func'] is \
        OneCycleLR._annealing_cos
    for key, value in model.state_dict().items():
        torch.testing.assert_close(ckpt['state_dict'][key], value)


def test_load_checkpoint_and_pretrained_init_cfg(benign_ckpt):
    path, model = benign_ckpt
    fresh = TinyNet()
    load_checkpoint(fresh, path, map_location='cpu', strict=True)
    torch.testing.assert_close(fresh.fc.weight, model.fc.weight)

    pretrained = TinyNet(init_cfg=dict(type='Pretrained', checkpoint=path))
    pretrained.init_weights()
    torch.testing.assert_close(pretrained.conv.weight, model.conv.weight)


def _assert_clear_refusal(error, path, offending):
    message = str(error)
    assert offending in message
    assert 'Nothing from the file was executed' in message
    assert f'get_unsafe_globals_in_checkpoint({str(path)!r})' in message
    assert 'tensors-only checkpoint' in message
    assert 'weights_only=False' not in message
    assert 'weights_only` set to `False' not in message


def test_malicious_reduce_is_refused_without_side_effects(tmp_path):
    target = tmp_path / 'created_by_unpickling.txt'
    path = tmp_path / 'malicious.pth'
    torch.save({'state_dict': {}, 'meta': CreatesFile(target)}, path)

    with pytest.raises(UnsafeCheckpointError) as excinfo:
        _load_checkpoint(str(path), map_location='cpu')
    assert isinstance(excinfo.value, pickle.UnpicklingError)
    _assert_clear_refusal(excinfo.value, path, f'{open.__module__}.open')
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint(TinyNet(), str(path))
    assert not target.exists()

    # The allow-list is not a blanket: plain torch.load refuses it too.
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert not target.exists()


def test_getattr_is_restricted(tmp_path):
    target = tmp_path / 'created_by_exec.txt'
    path = tmp_path / 'getattr_chain.pth'
    torch.save({'state_dict': {}, 'x': GetattrChain(target)}, path)

    with pytest.raises(UnsafeCheckpointError) as excinfo:
        _load_checkpoint(str(path), map_location='cpu')
    _assert_clear_refusal(excinfo.value, path,
                          "getattr(builtins.getattr, '__self__')")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert not target.exists()


def test_object_arrays_are_refused(tmp_path):
    path = tmp_path / 'object_array.pth'
    torch.save({'meta': np.array([1, 'a'], dtype=object)}, path)
    with pytest.raises(UnsafeCheckpointError) as excinfo:
        _load_checkpoint(str(path))
    _assert_clear_refusal(excinfo.value, path, 'ObjectDType')


def test_url_checkpoints_load_weights_only(tmp_path, monkeypatch, benign_ckpt):
    """``https://`` (and torchvision://, open-mmlab://) go through
    ``torch.hub``, whose ``weights_only`` defaults to False; check the cached
    copy is read with weights_only=True (no network: the file is cached)."""
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch_home'))
    cache = tmp_path / 'torch_home' / 'hub' / 'checkpoints'
    cache.mkdir(parents=True)
    path, _ = benign_ckpt
    (cache / 'benign.pth').write_bytes(open(path, 'rb').read())
    ckpt = _load_checkpoint('https://example.invalid/benign.pth')
    assert ckpt['meta']['iter'] == 3

    target = tmp_path / 'created_by_unpickling.txt'
    torch.save({'meta': CreatesFile(target)}, cache / 'evil.pth')
    with pytest.raises(UnsafeCheckpointError) as excinfo:
        _load_checkpoint('https://example.invalid/evil.pth')
    _assert_clear_refusal(excinfo.value, cache / 'evil.pth',
                          f'{open.__module__}.open')
    assert not target.exists()
