"""OpenMMLab checkpoints load with ``weights_only=True``; hostile ones don't.

The benign checkpoint is assembled from the real mmengine objects a Runner
saves (``MessageHub`` with ``HistoryBuffer``s, numpy scalars, an optimizer,
``OneCycleLR`` state, mmseg/mmdet-style ``dataset_meta``) and written by
:func:`mmengine.runner.save_checkpoint`. A full Runner train/resume cycle is
covered by ``tests/e2e/test_train_resume.py``. The hostile files are in
``tests/crafted_checkpoints.py`` and are loaded in a subprocess (a crash
there fails the test instead of killing pytest).
"""
import io
import json
import os
import os.path as osp
import pickle
import re
import subprocess
import sys
import zipfile

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
    SAFE_SCHEMES,
    CheckpointFileError,
    UnsafeCheckpointError,
    allow_openmmlab_checkpoints,
    check_loaded,
    install_safe_loaders,
    load_checkpoint_weights_only,
    load_from_local_weights_only,
)

from . import crafted_checkpoints

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
install_safe_loaders()  # what tools/train.py and tools/test.py do


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


def test_install_is_idempotent_and_routes_every_scheme():
    allow_openmmlab_checkpoints()
    install_safe_loaders()
    install_safe_loaders()
    assert CheckpointLoader._get_checkpoint_loader('some/local.pth') is \
        load_from_local_weights_only
    for path in ('https://x/a.pth', 'http://x/a.pth', 'open-mmlab://a',
                 'openmmlab://a', 'torchvision://a', 'modelzoo://a',
                 'mmcls://a', 's3://b/a.pth', 'cluster:s3://b/a.pth',
                 'petrel://b/a.pth', 'pavi://a'):
        loader = CheckpointLoader._get_checkpoint_loader(path)
        assert loader in SAFE_SCHEMES.values(), (path, loader)
    # every scheme mmengine registered has a safe loader: none is refused
    assert set(CheckpointLoader._schemes) == set(SAFE_SCHEMES)


def test_scheme_registered_after_install_is_refused(tmp_path):
    path = str(tmp_path / 'a.pth')
    torch.save({'state_dict': {}}, path)

    def load_from_unsafe(filename, map_location=None):
        return torch.load(filename[len('unsafe://'):], weights_only=False)

    CheckpointLoader.register_scheme('unsafe://', load_from_unsafe)
    try:
        with pytest.raises(UnsafeCheckpointError,
                           match='registered after .*load_from_unsafe'):
            _load_checkpoint('unsafe://' + path)
    finally:
        del CheckpointLoader._schemes['unsafe://']


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
    assert 'Nothing from the file was executed and no process-wide state ' \
        'was changed' in message
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
    _assert_clear_refusal(excinfo.value, path, "numpy dtype 'O8'")


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


@pytest.fixture(scope='module')
def crafted_report(tmp_path_factory):
    """Every crafted file through every loading path, in one subprocess
    (``tests/crafted_checkpoints.py``): the JSON lines it printed."""
    folder = str(tmp_path_factory.mktemp('crafted'))
    names = crafted_checkpoints.write_all(folder)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    env.pop('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', None)
    proc = subprocess.run(
        [sys.executable, '-m', 'tests.crafted_checkpoints', folder, *names],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, timeout=900)
    lines = [json.loads(line) for line in proc.stdout.splitlines()
             if line.startswith('{')]
    # a crash (SIGSEGV: returncode -11) names the case it died in
    assert proc.returncode == 0 and lines and lines[-1] == {'done': True}, (
        f'loader process ended with {proc.returncode} during '
        f'{lines[-1] if lines else None}:\n{proc.stderr[-3000:]}')
    return names, lines


CRAFTED_PATHS = ('torch', 'direct', 'mmengine', 'env', 'open-mmlab', 'https',
                 's3', 'pavi', 'pretrained')


def test_import_only_allow_lists(crafted_report):
    """``import tlalign_mm`` leaves mmengine's loaders alone (issue 13)."""
    _, lines = crafted_report
    assert lines[0] == {'local_loader_after_import': 'load_from_local'}


@pytest.mark.parametrize('path', CRAFTED_PATHS)
def test_crafted_files_refused_on_every_path(crafted_report, path):
    """The hidden-object dtype (a segfault inside the unpickler when
    unchecked), HistoryBuffer class-state mutation, object and structured
    arrays, and ``__reduce__`` payloads nested in meta, message_hub and
    optimizer state: refused on every loading path, even with
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``; no payload ran and
    ``HistoryBuffer`` statistics still compute correctly afterwards."""
    names, lines = crafted_report
    results = {r['file']: r for r in lines if r.get('path') == path}
    assert set(results) == set(names)
    for name, result in results.items():
        assert result['outcome'].startswith('refused: '), result
        if path != 'torch':  # torch's own error type on the bare path
            assert 'UnsafeCheckpointError' in result['outcome'], result
        assert result['statistics_intact'], result
        assert not result['payload_ran'], result


def test_crafted_refusals_name_the_problem(crafted_report):
    _, lines = crafted_report
    direct = {r['file']: r['outcome'] for r in lines
              if r.get('path') == 'direct'}
    assert "numpy dtype 'S8' with pickled state" in \
        direct['hidden_object_scalar.pth']
    assert "numpy dtype 'f8' with pickled state" in \
        direct['hidden_object_array.pth']
    assert "'mean': 'mmengine.logging.history_buffer.HistoryBuffer.max'" in \
        direct['history_buffer_mutation.pth']
    assert "numpy dtype 'V8'" in direct['structured_array.pth']
    for name in ('reduce_in_meta.pth', 'reduce_in_message_hub.pth',
                 'reduce_in_optimizer.pth'):
        assert 'refused global(s): io.open' in direct[name]


def test_history_buffer_is_rebuilt_not_set_state(benign_ckpt):
    path, _ = benign_ckpt
    before = dict(HistoryBuffer._statistics_methods)
    hub = load_checkpoint_weights_only(path)['message_hub']
    buffer = hub['log_scalars']['train/loss']
    assert type(buffer) is HistoryBuffer
    assert 'statistics_methods' not in vars(buffer)
    assert HistoryBuffer._statistics_methods == before
    # plain arrays, pickled again under numpy's own names
    assert type(buffer._log_history) is np.ndarray
    assert crafted_checkpoints.history_statistics_intact()


def test_check_loaded_refuses_objects_in_disguise():
    assert check_loaded({'a': np.arange(3)})['a'].tolist() == [0, 1, 2]
    for bad in (np.array([1, 'a'], dtype=object),
                np.zeros(2, dtype=[('a', 'f8')]),
                np.dtype('O')):
        with pytest.raises(UnsafeCheckpointError, match="meta.*\\['x'\\]"):
            check_loaded({'meta': {'x': [bad]}}, 'ckpt')
    deep = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(UnsafeCheckpointError, match='nested more than'):
        check_loaded(deep)
    cyclic = [1]
    cyclic.append(cyclic)
    assert check_loaded(cyclic) is cyclic


def _torchscript(path):
    torch.jit.save(torch.jit.script(nn.Linear(2, 2)), path)


@pytest.mark.parametrize('case, message', [
    ('empty', 'is empty (0 bytes)'),
    ('random', 'is not a PyTorch checkpoint'),
    ('text', 'is not a PyTorch checkpoint'),
    ('truncated', 'is truncated or corrupt'),
    ('torchscript', 'is a TorchScript archive'),
    ('zip', 'zip archive without data.pkl'),
])
def test_bad_files_get_one_clear_message(tmp_path, benign_ckpt, case,
                                         message):
    path = str(tmp_path / 'bad.pth')
    if case == 'empty':
        open(path, 'wb').close()
    elif case == 'random':
        with open(path, 'wb') as f:
            f.write(np.random.default_rng(0).bytes(4096))
    elif case == 'text':
        with open(path, 'w') as f:
            f.write('model weights: see README\n')
    elif case == 'truncated':
        data = open(benign_ckpt[0], 'rb').read()
        with open(path, 'wb') as f:
            f.write(data[:len(data) // 2])
    elif case == 'torchscript':
        _torchscript(path)
    else:
        with zipfile.ZipFile(path, 'w') as z:
            z.writestr('weights.txt', '1 2 3')
    with pytest.raises(CheckpointFileError) as excinfo:
        _load_checkpoint(path)
    text = str(excinfo.value)
    assert message in text and repr(path) in text
    assert 'unsafe' not in text and 'allow-list' not in text
    assert '--resume' in text  # what to do after an interrupted save


def test_in_memory_files_go_through_the_same_checks():
    with pytest.raises(CheckpointFileError, match='is empty'):
        from tlalign_mm.checkpoint_safety import _load
        _load(io.BytesIO(b''), 's3://bucket/a.pth', None, None)


def test_env_override_cannot_turn_weights_only_off(tmp_path, monkeypatch,
                                                    benign_ckpt):
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    path, _ = benign_ckpt
    assert _load_checkpoint(path)['meta']['iter'] == 3  # benign still loads
    target = tmp_path / 'created_by_unpickling.txt'
    evil = tmp_path / 'evil.pth'
    torch.save({'meta': CreatesFile(target)}, evil)
    with pytest.raises(UnsafeCheckpointError):
        _load_checkpoint(str(evil))
    assert not target.exists()


def test_open_mmlab_scheme_loads_benign_file(tmp_path, monkeypatch,
                                             benign_ckpt):
    path, model = benign_ckpt
    home = tmp_path / 'mmengine_home'
    home.mkdir()
    (home / 'open_mmlab.json').write_text(json.dumps({'tiny/net': path}))
    monkeypatch.setenv('MMENGINE_HOME', str(home))
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    fresh = TinyNet()
    load_checkpoint(fresh, 'open-mmlab://tiny/net', strict=True)
    torch.testing.assert_close(fresh.fc.weight, model.fc.weight)


@pytest.mark.e2e
@pytest.mark.parametrize('case, error, message', [
    ('hidden_object_scalar.pth', 'UnsafeCheckpointError',
     "numpy dtype 'S8' with pickled state"),
    ('empty.pth', 'CheckpointFileError', 'is empty (0 bytes)'),
    ('random.pth', 'CheckpointFileError', 'is not a PyTorch checkpoint'),
    ('bare_state_dict.pth', 'CheckpointMismatchError',
     'cannot be resumed: it has no meta'),
])
def test_train_resume_refuses_with_one_clear_message(tmp_path, case, error,
                                                     message):
    """``tools/train.py --resume FILE``: the crafted file that made it exit
    with SIGSEGV, an empty file (EOFError with no text), random bytes
    (called "unsafe globals") and a bare state dict (KeyError: 'meta') each
    stop the run with one message naming the file."""
    from tests.engine.tiny_run import write_config, write_images
    data = str(tmp_path / 'data')
    write_images(data)
    config = str(tmp_path / 'tiny.py')
    write_config(config, data)
    path = str(tmp_path / case)
    if case == 'empty.pth':
        open(path, 'wb').close()
    elif case == 'random.pth':
        with open(path, 'wb') as f:
            f.write(np.random.default_rng(1).bytes(1000))
    elif case == 'bare_state_dict.pth':
        torch.save(TinyNet().state_dict(), path)
    else:
        crafted_checkpoints.write_all(str(tmp_path))
    proc = subprocess.run(
        [sys.executable, osp.join(ROOT, 'tools', 'train.py'), config,
         '--work-dir', str(tmp_path / 'work'), '--resume', path],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1'),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=600)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-3000:])
    # the traceback ends with our exception (its message may span lines)
    assert re.search(rf'^tlalign_mm\.[\w.]*{error}: ', proc.stdout, re.M), \
        proc.stdout[-3000:]
    assert message in proc.stdout and repr(path) in proc.stdout
    assert 'Traceback' in proc.stdout and 'KeyError' not in proc.stdout
