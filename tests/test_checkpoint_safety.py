"""``tlalign_mm.checkpoint.load`` and the paths that reach it: hostile files
refused with one message naming them, or reduced to what a checkpoint
holds; our own checkpoints plain, foreign ones read without building numpy
or mmengine objects.

The hostile files are ``tests/crafted_checkpoints.py``; they are loaded in
a subprocess with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (a crash there
fails the test instead of killing pytest), on every loading path and, for
the cases that need a run, through ``tools/train.py``, ``tools/test.py``
and mmengine's own ``Runner``.
"""
import importlib
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
    CheckpointSafetyHook,
    LastCheckpointHook,
    install,
    load,
    mmengine_adapter,
    parse_config,
)
from tlalign_mm.checkpoint.plain import capture_rng, plain_checkpoint

from . import crafted_checkpoints

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
load_module = importlib.import_module('tlalign_mm.checkpoint.load')
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


def _results(*args):
    """``python -m tests.crafted_checkpoints ARGS`` with
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1: the records it printed."""
    proc = subprocess.run(
        [sys.executable, '-m', 'tests.crafted_checkpoints', *args], cwd=ROOT,
        env=_env(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD='1'), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, timeout=900)
    lines = [json.loads(line[len('RESULT '):]) for line in
             proc.stdout.splitlines() if line.startswith('RESULT ')]
    assert proc.returncode == 0 and lines and lines[-1] == {'done': True}, (
        f'loader process ended with {proc.returncode} during '
        f'{lines[-1] if lines else None}:\n{proc.stderr[-3000:]}')
    return lines


@pytest.fixture(scope='module')
def crafted_report(tmp_path_factory):
    """Every crafted file through every loading path, in one subprocess."""
    folder = str(tmp_path_factory.mktemp('crafted'))
    names = crafted_checkpoints.write_all(folder)
    return names, [r for r in _results(folder, *names) if 'file' in r]


#: file -> what the refusal says (None: it loads, without what no
#: checkpoint holds: numpy / HistoryBuffer objects never built, config
#: text never run)
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
    'deflated_record.pth': "records ['deflated_record/data/0'] are compressed",
    'bit_flipped.pth': 'corrupt or crafted',
    'a_directory.pth': 'it is a directory',
    'not_zip.pth': 'not the zip archive torch.save writes',
    # issue 30
    'config_code.pth': None,
    'hub_tensor.pth': 'message_hub = a Tensor is not a message hub',
    'shared_list.pth': 'it nests deeper than 32 levels',
    'rng_position_625.pth': 'resume_state is not a generator state',
    'rng_position_huge.pth': 'resume_state is not a generator state',
    'sparse_tensor.pth': "state_dict['w'] is a torch.sparse_coo",
    'quantized_tensor.pth': "state_dict['w'] is a torch.strided torch.qint8",
    'hub_list.pth': 'message_hub = a list is not a message hub',
    'config_unhashable.pth': None,
}
#: paths that return the checkpoint; paths that are tools (their output)
LOADERS = ('mmengine', 'https', 'open-mmlab', 'pretrained',
           'mmengine-pretrained')
TOOLS = ('export', 'label_maps')


@pytest.mark.e2e
@pytest.mark.parametrize('path', ['build_model', *LOADERS, 'mmseg-inferencer',
                                  'mmdet-inferencer', *TOOLS])
def test_crafted_files_on_every_path(crafted_report, path):
    """Refused with one error naming the file (a tool: one ``error:`` line)
    or loaded without what no checkpoint holds; no payload ran, the
    HistoryBuffer statistics are still right, the deflated record never
    inflated (the process grew by less than a third of it). Files that
    load do not fit the tools' models (they say so after ``error:``); the
    inferencers get no config text they could run, so they stop."""
    names, lines = crafted_report
    results = {r['file']: r for r in lines if r['path'] == path}
    assert set(results) == set(names) == set(EXPECTED)
    first_rss = lines[0]['max_rss_mb']
    for name, result in results.items():
        outcome = result['outcome']
        assert not result['payload_ran'] and result['statistics_intact'], \
            result
        if path in TOOLS:
            assert outcome == 'ran' or outcome.startswith('error: '), result
        if EXPECTED[name] is None:
            assert outcome == 'loaded' or path not in LOADERS, result
            continue
        assert 'Refused checkpoint ' in outcome and name in outcome, result
        assert EXPECTED[name] in outcome and '\n' not in outcome, result
    assert results['deflated_record.pth']['max_rss_mb'] - first_rss < \
        crafted_checkpoints.BOMB_BYTES / 3 / 2**20
    if path in ('mmseg-inferencer', 'mmdet-inferencer'):  # no config text
        assert results['config_code.pth']['outcome'].startswith('refused: ')
    if path == 'export':  # its recorded config is not data: none recorded
        assert results['config_unhashable.pth']['outcome'] == 'ran'


@pytest.fixture(scope='module')
def runs_report(tmp_path_factory):
    """:data:`crafted_checkpoints.RUNS`, in one subprocess."""
    return {(r['case'], r['path']): r for r in _results(
        '--runs', str(tmp_path_factory.mktemp('runs'))) if 'case' in r}


#: (case, path) -> how it ends: an ``error:`` line with this text, the
#: epoch training started at, or what mmengine's Runner raised
EXPECTED_RUNS = {
    ('hub_tensor', 'train FILE'): 'error: Refused checkpoint',
    ('hub_tensor', 'train auto'): 'error: --resume found checkpoints',
    ('hub_tensor', 'runner FILE'): 'raised CheckpointError: Refused',
    ('hub_list', 'train FILE'): 'error: Refused checkpoint',
    ('best_ckpt_victim', 'train FILE'): 'trained from epoch 1',
    ('best_ckpt_victim', 'runner FILE'): 'trained from epoch 1',
    ('record_outside', 'train auto'): 'trained from epoch 0',
    ('record_outside', 'runner auto'): 'trained from epoch 0',
    ('symlink_outside', 'train auto'): 'error: --resume found checkpoints',
    ('symlink_outside', 'runner auto'): 'raised CheckpointError: --resume',
    ('sparse_tensor', 'test'): 'error: Refused checkpoint',
    ('missing_file', 'train FILE'): 'error: --resume',
}


@pytest.mark.e2e
@pytest.mark.parametrize('case, path', list(EXPECTED_RUNS))
def test_crafted_runs(runs_report, case, path):
    """Issue 30's cases that need a run, through our tools and mmengine's
    own Runner: a message hub that is a tensor or a list is refused in one
    line; a ``best_ckpt`` (save_best deletes it at the next best) is not
    taken from the file; auto-resume never leaves the work dir (a record
    naming an outside file starts afresh, a link out is not intact); a
    sparse tensor is refused; a missing ``--resume`` file is named before
    any Runner is built. No victim folder is touched."""
    result = runs_report[case, path]
    assert result['outcome'].startswith(EXPECTED_RUNS[case, path]), result
    assert result['victim_intact'], result
    assert result['built'] == (case != 'missing_file'), result


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


def test_config_text_and_paths_never_come_back(tmp_path):
    """Issue 30, case 1 (and the last review's holes 1 and 4) at the
    loader: config text comes back as data or not at all (``meta['cfg']``
    the dict it assigns, ``meta['config']`` only ``gpu_ids``, which
    ``Runner.resume`` runs it for, the hub's copy dropped); the hub's paths
    (``best_ckpt``: save_best deletes it) and values of the wrong kind are
    dropped, and ``resumed_keys`` with them."""
    marker = tmp_path / 'MARK'
    path = str(tmp_path / 'evil.pth')
    code = f"__import__('os').system('touch {marker}')\n"
    info = dict(cfg=code, best_ckpt='/victim', best_ckpt_top1='/v', iter=3,
                last_ckpt='/etc/passwd', keep_ckpt_ids=['../../x'],
                best_score=-1.0, eta='soon')
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': dict(
        epoch=0, iter=0, cfg="model = dict(type='X', sizes=(1, 2))\n",
        config=f'gpu_ids = [0, 1]\n{code}'), 'message_hub': dict(
            log_scalars={}, runtime_info=info,
            resumed_keys=dict.fromkeys(info, True))}, path)
    got = load(path)
    assert got['meta'] == dict(epoch=0, iter=0, config='gpu_ids = [0, 1]\n',
                               cfg=dict(model=dict(type='X', sizes=(1, 2))))
    assert got['message_hub'] == dict(
        log_scalars={}, runtime_info=dict(best_score=-1.0, iter=3),
        resumed_keys=dict(best_score=True, iter=True))
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': {
        'cfg': code, 'config': code}}, path)
    assert load(path)['meta'] == {}
    assert not marker.exists()


@pytest.mark.parametrize('depth', [24, 64])
def test_the_walk_visits_each_object_once(tmp_path, monkeypatch, depth):
    """Case 4: one list held twice, 64 levels deep, is a few hundred bytes
    and 2**64 paths. The walk visits each list once (two calls a level:
    one visit, one memo hit) and refuses what nests deeper than 32
    levels."""
    calls, walk = [], load_module._Walk.__call__

    def counted(self, *args, **kwargs):
        calls.append(1)
        assert len(calls) < 10**4, 'the walk does not remember objects'
        return walk(self, *args, **kwargs)

    monkeypatch.setattr(load_module._Walk, '__call__', counted)
    path = str(tmp_path / 'shared.pth')
    torch.save({'meta': {'dataset_meta': crafted_checkpoints.shared_list(
        depth)}}, path)
    if depth > load_module.MAX_DEPTH:
        with pytest.raises(CheckpointError, match='nests deeper than 32'):
            load(path)
    else:
        kept = load(path)['meta']['dataset_meta']
        assert kept[0] is kept[1]
    assert len(calls) <= 2 * min(depth, load_module.MAX_DEPTH) + 8


@pytest.mark.parametrize('state', [
    'not a state', dict(rng=dict(torch=torch.zeros(3, dtype=torch.uint8))),
    dict(rng=dict(capture_rng(), numpy=('MT19937', [1, 2], 0, 0, 0.0))),
    dict(rng=dict(capture_rng(), python=(3, (1, 2), None))),
    dict(rng=capture_rng(), sampler_seed='0'),
    dict(rng=capture_rng(), sampler_seed=torch.tensor(0)),
    crafted_checkpoints.rng_at(625), crafted_checkpoints.rng_at(2**31 - 1),
], ids=lambda s: str(s)[:30])
def test_a_crafted_resume_state_is_refused_naming_the_file(tmp_path, state):
    """Case 6: numpy's legacy MT19937 takes any position, and the resumed
    run's first draw read past its 624-word key; each generator's state is
    checked as it defines it."""
    path = str(tmp_path / 'x.pth')
    torch.save({'state_dict': {'w': torch.ones(1)}, 'resume_state': state},
               path)
    with pytest.raises(CheckpointError, match=f"Refused checkpoint '{path}': "
                       'its resume_state is not a generator state'):
        load(path)
    torch.save({'state_dict': {'w': torch.ones(1)}, 'resume_state':
                crafted_checkpoints.rng_at(624)}, path)  # the key's end
    assert load(path)['resume_state']['rng']['numpy'][2] == 624


def test_parse_config_reads_literals_and_skips_code():
    cfg = parse_config("model = dict(type='X', depth=-2, sizes=(1, 2.5), "
                       "cfg=dict(a=None, b=[True]), d={'k': 'v'})\n"
                       "x = __import__('os').system('ls')\nimport os\n"
                       'y = dict(**z)\nw = {[1]: 2}\nf(1)\n')
    assert cfg == {'model': dict(type='X', depth=-2, sizes=(1, 2.5),
                                 cfg=dict(a=None, b=[True]), d={'k': 'v'})}
    assert parse_config('not python (') == {}


@pytest.mark.parametrize('case, message', [
    ('empty', 'it is empty'),
    ('random', 'not the zip archive torch.save writes'),
    ('truncated', 'it is truncated'),
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
    mmengine's loads through ``load`` and its auto-resume through
    ``find_resume_checkpoint``; ``tlalign_mm.checkpoint.install()`` is
    still the function after the line's import."""
    code = (
        'import torch; from mmengine.runner.checkpoint import '
        'CheckpointLoader as C; load = C.load_checkpoint.__func__; '
        'before = set(map(str, torch.serialization.get_safe_globals())); '
        'import tlalign_mm; added = set(map(str, '
        'torch.serialization.get_safe_globals())) - before; '
        "print(C.load_checkpoint.__func__ is load, not [g for g in added if "
        "'numpy' in g or 'mmengine' in g or 'tlalign' in g]); "
        'import tlalign_mm.checkpoint.install; '
        'import mmengine.runner.runner as r; tlalign_mm.checkpoint.install();'
        ' print(C.load_checkpoint.__func__.__module__, '
        'r.find_latest_checkpoint.__name__)')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=_env(),
                         stdout=subprocess.PIPE, text=True,
                         timeout=300).stdout.split()
    assert out == ['True', 'True', 'tlalign_mm.checkpoint.mmengine_adapter',
                   'find_resume_checkpoint']


def test_another_mmengine_trains_and_resumes_as_mmengine_does(monkeypatch):
    """Issue 29: only exact resume uses mmengine's private API. With another
    mmengine, install() and both hooks build, and a resume is mmengine's
    own (no generator states restored), with a warning saying so."""
    import types

    import mmengine
    logged = []
    monkeypatch.setattr(mmengine_adapter, 'print_log',
                        lambda message, **kwargs: logged.append(message))
    ckpt = dict(meta=dict(epoch=1, iter=3),
                resume_state=dict(rng=capture_rng(), sampler_seed=0))
    runner = types.SimpleNamespace(_resume=True, _load_from='x.pth',
                                   _randomness_cfg={})
    for version, exact in (('0.11.0', False), (mmengine.__version__, True)):
        monkeypatch.setattr(mmengine, '__version__', version)
        install()
        hook, _ = LastCheckpointHook(), CheckpointSafetyHook()
        hook.after_load_checkpoint(runner, ckpt)
        assert (hook._pending is not None) == exact
    assert logged == ['Exact resume is off (mmengine 0.11.0, not 0.10.7): '
                      "the resume is mmengine's own; the sampler position "
                      'and random draws are not restored.']
