"""``tlalign_mm.checkpoint.load`` and the paths that reach it: hostile files
refused with one message naming them, our own checkpoints plain, foreign
ones read without building numpy or mmengine objects.

The hostile files are ``tests/crafted_checkpoints.py``; they are loaded in
a subprocess with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (a crash there
fails the test instead of killing pytest).
"""
import json
import os
import os.path as osp
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.optim.scheduler import OneCycleLR
from mmengine.runner import load_checkpoint, save_checkpoint

import tlalign_mm  # noqa: F401
from tlalign_mm.checkpoint import (
    CheckpointError,
    install,
    load,
    mmengine_adapter,
    parse_config,
)
from tlalign_mm.checkpoint.plain import plain_checkpoint

from . import crafted_checkpoints

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
install()  # what the tools do


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    env.pop('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', None)
    env.update(extra)
    return env


def _runner_checkpoint():
    """What ``Runner.save_checkpoint`` puts in a checkpoint, built from the
    real mmengine objects (message hub, numpy scalars, OneCycleLR)."""
    model = nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = OneCycleLR(optimizer, eta_max=1e-2, total_steps=10)
    model(torch.randn(2, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    hub = MessageHub.get_instance('test_checkpoint_safety')
    for i in range(3):
        hub.update_scalar('train/loss', 1.0 / (i + 1))
    hub.update_info('eta', np.float64(12.5))
    hub.update_info('best_score', np.float32(15.76))
    meta = dict(epoch=1, iter=3, seed=np.int64(42),
                class_weights=np.array([0.5, 1.0], dtype=np.float32),
                dataset_meta=dict(classes=('road', 'car')))
    return model, dict(meta=meta, state_dict=model.state_dict(),
                       message_hub=hub.state_dict(),
                       optimizer=optimizer.state_dict(),
                       param_schedulers=[scheduler.state_dict()])


@pytest.fixture(scope='module')
def crafted_report(tmp_path_factory):
    """Every crafted file through every loading path, in one subprocess,
    with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1: the JSON lines it printed."""
    folder = str(tmp_path_factory.mktemp('crafted'))
    names = crafted_checkpoints.write_all(folder)
    proc = subprocess.run(
        [sys.executable, '-m', 'tests.crafted_checkpoints', folder, *names],
        cwd=ROOT, env=_env(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD='1'),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=600)
    lines = [json.loads(line) for line in proc.stdout.splitlines()
             if line.startswith('{')]
    assert proc.returncode == 0 and lines and lines[-1] == {'done': True}, (
        f'loader process ended with {proc.returncode} during '
        f'{lines[-1] if lines else None}:\n{proc.stderr[-3000:]}')
    return names, [r for r in lines if 'file' in r]


#: file -> what the refusal says (None: it loads, with the numpy /
#: HistoryBuffer objects dropped, never built)
EXPECTED = {
    'reduce_system.pth': 'outside the weights-only allow-list (posix.system)',
    'reduce_open_in_hub.pth': 'outside the weights-only allow-list (io.open)',
    'exec_via_getattr.pth': 'corrupt or crafted',
    'hidden_object_scalar.pth': None,
    'hidden_object_array.pth': None,
    'object_array.pth': None,
    'history_buffer_mutation.pth': None,
    'header_huge.pth': 'corrupt or crafted',
    'header_zero_stride.pth': 'more than its storage holds',
    'header_offset.pth': 'corrupt or crafted',
    'header_negative_stride.pth': 'corrupt or crafted',
    'top_level_list.pth': 'it holds a list',
    'meta_epoch_negative.pth': "meta['epoch'] = -5 is not an integer",
    'meta_iter_absurd.pth': "meta['iter'] = 1000000000000000.0 is not",
    'deflated_record.pth': "record 'deflated_record/data/0' is compressed",
    'bit_flipped.pth': 'corrupt or crafted',
    'a_directory.pth': 'it is a directory',
}


@pytest.mark.e2e
@pytest.mark.parametrize('path', ['mmengine', 'https', 'open-mmlab',
                                  'pretrained'])
def test_crafted_files_on_every_path(crafted_report, path):
    """Refused with one CheckpointError naming the file, or (numpy and
    HistoryBuffer payloads) loaded with those objects dropped; no payload
    ran, HistoryBuffer statistics still right, the deflated record never
    inflated (the process grew by less than a third of it)."""
    names, lines = crafted_report
    results = {r['file']: r for r in lines if r['path'] == path}
    assert set(results) == set(names) == set(EXPECTED)
    first_rss = lines[0]['max_rss_mb']
    for name, result in results.items():
        assert not result['payload_ran'] and result['statistics_intact'], \
            result
        if EXPECTED[name] is None:
            assert result['outcome'] == 'loaded', result
            continue
        assert result['outcome'].startswith('refused: CheckpointError: '
                                            'Refused checkpoint '), result
        assert EXPECTED[name] in result['outcome'], result
        assert name in result['outcome'], result
    assert results['deflated_record.pth']['max_rss_mb'] - first_rss < \
        crafted_checkpoints.BOMB_BYTES / 3 / 2**20


def test_foreign_numpy_objects_are_dropped_never_built(tmp_path):
    """A Runner checkpoint written by stock mmengine (HistoryBuffers, numpy
    scalars and arrays): weights and plain metadata load, the numpy /
    HistoryBuffer values are dropped, and HistoryBuffer's class state is
    untouched."""
    model, ckpt = _runner_checkpoint()
    path = str(tmp_path / 'foreign.pth')
    save_checkpoint(ckpt, path)
    before = dict(HistoryBuffer._statistics_methods)
    got = load(path)
    torch.testing.assert_close(got['state_dict']['weight'], model.weight)
    assert got['meta'] == dict(epoch=1, iter=3,
                               dataset_meta=dict(classes=('road', 'car')))
    assert got['message_hub']['log_scalars'] == {}
    assert 'eta' not in got['message_hub']['runtime_info']
    assert 'anneal_func' not in got['param_schedulers'][0]
    assert HistoryBuffer._statistics_methods == before


def test_our_checkpoints_load_with_the_stock_allow_list(tmp_path):
    """After ``plain_checkpoint`` (CheckpointSafetyHook's
    before_save_checkpoint) a Runner checkpoint needs no global beyond
    torch's own, and the message hub comes back as HistoryBuffers."""
    _, ckpt = _runner_checkpoint()
    buffer = ckpt['message_hub']['log_scalars']['train/loss']
    plain_checkpoint(ckpt)
    path = str(tmp_path / 'ours.pth')
    torch.save(ckpt, path)
    saved = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        assert torch.serialization.get_unsafe_globals_in_checkpoint(
            path) == []
        torch.load(path, weights_only=True)
    finally:
        torch.serialization.add_safe_globals(saved)
    got = load(path)
    restored = got['message_hub']['log_scalars']['train/loss']
    assert type(restored) is HistoryBuffer
    assert restored.mean() == buffer.mean() and \
        restored.current() == buffer.current()
    assert got['message_hub']['runtime_info']['best_score'] == \
        pytest.approx(15.76)
    assert got['meta']['seed'] == 42


def test_meta_config_is_parsed_never_executed(tmp_path):
    """Hole 1 at the loader: Runner.resume would execute meta['config'];
    load() keeps only gpu_ids, which is what mmengine checks with it."""
    marker = tmp_path / 'MARK'
    path = str(tmp_path / 'evil.pth')
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': {
        'epoch': 0, 'iter': 0,
        'config': f"gpu_ids = [0, 1]\n__import__('os').system('touch "
                  f"{marker}')\n"}}, path)
    assert load(path)['meta']['config'] == 'gpu_ids = [0, 1]\n'
    assert not marker.exists()
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': {
        'config': "import os\nos.system('touch x')"}}, path)
    assert 'config' not in load(path)['meta']


def test_parse_config_reads_literals_and_refuses_code():
    cfg = parse_config("model = dict(type='X', depth=-2, sizes=(1, 2.5), "
                       "cfg=dict(a=None, b=[True]), d={'k': 'v'})\n")
    assert cfg == {'model': dict(type='X', depth=-2, sizes=(1, 2.5),
                                 cfg=dict(a=None, b=[True]), d={'k': 'v'})}
    for code in ("x = __import__('os').system('ls')", 'import os',
                 'x = dict(**y)', "x = open('f')", 'x = [a for a in b]',
                 'f(1)'):
        with pytest.raises(ValueError):
            parse_config(code)


@pytest.mark.parametrize('case, message', [
    ('empty', 'it is empty'),
    ('random', 'not the zip archive torch.save writes'),
    ('truncated', 'truncated or corrupt'),
    ('torchscript', 'TorchScript archive'),
    ('zip', 'zip archive without data.pkl'),
])
def test_broken_files_get_one_clear_message(tmp_path, case, message):
    path = str(tmp_path / 'bad.pth')
    if case == 'empty':
        open(path, 'wb').close()
    elif case == 'random':
        open(path, 'wb').write(np.random.default_rng(0).bytes(4096))
    elif case == 'truncated':
        torch.save({'w': torch.ones(1000)}, path)
        data = open(path, 'rb').read()
        open(path, 'wb').write(data[:len(data) // 2])
    elif case == 'torchscript':
        torch.jit.save(torch.jit.script(nn.Linear(2, 2)), path)
    else:
        with zipfile.ZipFile(path, 'w') as z:
            z.writestr('weights.txt', '1 2 3')
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(nn.Linear(2, 2), path)
    text = str(error.value)
    assert message in text and repr(path) in text and '\n' not in text


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='nothing.pth'):
        load(str(tmp_path / 'nothing.pth'))


def test_env_override_cannot_turn_weights_only_off(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    marker = tmp_path / 'MARK'
    path = str(tmp_path / 'evil.pth')
    torch.save({'meta': crafted_checkpoints._Reduce(open, (str(marker),
                                                           'w'))}, path)
    with pytest.raises(CheckpointError, match='io.open'):
        load_checkpoint(nn.Linear(2, 2), path)
    assert not marker.exists()


def test_url_and_model_zoo_names_read_the_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'torch'))
    cache = tmp_path / 'torch' / 'hub' / 'checkpoints'
    cache.mkdir(parents=True)
    model = nn.Linear(2, 2)
    torch.save({'state_dict': model.state_dict()}, cache / 'net.pth')
    home = tmp_path / 'mmengine_home'
    home.mkdir()
    (home / 'open_mmlab.json').write_text(
        json.dumps({'tiny/net': 'https://example.invalid/a/net.pth'}))
    monkeypatch.setenv('MMENGINE_HOME', str(home))
    for name in ('https://example.invalid/net.pth', 'open-mmlab://tiny/net'):
        fresh = nn.Linear(2, 2)
        load_checkpoint(fresh, name, strict=True)
        torch.testing.assert_close(fresh.weight, model.weight)
    with pytest.raises(CheckpointError, match='pass its local path'):
        load('s3://bucket/net.pth')


@pytest.mark.e2e
def test_import_alone_changes_nothing_the_opt_in_line_installs():
    """Hole 10, the design choice the README states: ``import tlalign_mm``
    leaves torch's allow-list and mmengine's loader alone (so mmengine's
    own load_checkpoint is mmengine's, with what the environment says);
    the tools and the config line ``tlalign_mm.checkpoint.install`` route
    mmengine through ``load``."""
    code = (
        'import torch; from mmengine.runner.checkpoint import '
        'CheckpointLoader as C; load = C.load_checkpoint.__func__; '
        'before = set(map(str, torch.serialization.get_safe_globals())); '
        'import tlalign_mm; added = set(map(str, '
        'torch.serialization.get_safe_globals())) - before; '
        "print(C.load_checkpoint.__func__ is load, not [g for g in added if "
        "'numpy' in g or 'mmengine' in g or 'tlalign' in g]); "
        'import tlalign_mm.checkpoint.install; '
        'print(C.load_checkpoint.__func__.__module__)')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=_env(),
                         stdout=subprocess.PIPE, text=True,
                         timeout=300).stdout.split()
    assert out == ['True', 'True', 'tlalign_mm.checkpoint.mmengine_adapter']


def test_adapter_refuses_another_mmengine_version(monkeypatch):
    mmengine_adapter.check_version()  # the installed one: 0.10.7
    with pytest.raises(RuntimeError, match=r'written for mmengine 0\.10\.7, '
                       r'this is mmengine 0\.11\.0'):
        mmengine_adapter.check_version('0.11.0')
    import mmengine
    monkeypatch.setattr(mmengine, '__version__', '0.10.8')
    with pytest.raises(RuntimeError, match='this is mmengine 0.10.8'):
        install()
