"""Hostile checkpoint files, and a runner that loads them on every path.

Each ``CRAFTED`` entry writes a file with :func:`torch.save`, using objects
whose ``__reduce__`` makes the pickle a real attacker would write. They are
loaded in a *subprocess* (``python -m tests.crafted_checkpoints DIR``): a
file that crashes numpy kills that process, not pytest. It prints one JSON
line per (file, loading path) and finally ``{"done": ...}``.

Loading paths:

* ``mmengine``: mmengine's ``_load_checkpoint`` after
  ``install_safe_loaders()`` (what ``load_from``, ``--resume`` and
  ``init_cfg=Pretrained`` use);
* ``direct``: :func:`tlalign_mm.checkpoint_safety.
  load_checkpoint_weights_only`;
* ``torch``: plain ``torch.load(weights_only=True)`` with only the
  allow-list of ``import tlalign_mm`` (no loaders installed);
* ``env``, ``open-mmlab``, ``https``, ``s3``, ``pretrained``: with
  ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``: mmengine's local scheme, an
  ``open-mmlab://`` name resolved through ``$MMENGINE_HOME/open_mmlab.json``
  to the file, an ``https://`` URL whose file is in the torch hub cache, an
  ``s3://`` path read through a stand-in petrel backend, a ``pavi://`` path
  downloaded by a stand-in ``pavi`` module, and the strict
  ``Pretrained`` initializer's reader (``load_backbone_state_dict``).
"""
import json
import os
import os.path as osp
import shutil
import sys
import types

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

try:  # numpy >= 2.0
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover
    from numpy.core.multiarray import _reconstruct, scalar

#: file name -> what the runner must find afterwards in the tmp dir if the
#: payload ran (every code-running payload creates this marker)
MARKER = 'payload_ran.txt'


class _Reduce:
    """Pickles as ``fn(*args)``, then ``BUILD state`` if given."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        if self.state is None:
            return (self.fn, self.args)
        return (self.fn, self.args, self.state)


def crafted_dtype(spec, state):
    """``numpy.dtype(spec, False, True)`` with a BUILD ``state``."""
    return _Reduce(np.dtype, (spec, False, True), state)


def hidden_object_scalar():
    """A bytes dtype whose pickled flags claim it holds Python objects
    (NPY_ITEM_REFCOUNT | NPY_USE_GETITEM): numpy then treats the 8 raw
    file bytes as an object pointer. Unchecked, ``scalar()`` segfaults
    inside the unpickler."""
    dtype = crafted_dtype('S8', (3, '|', None, None, None, 8, 1, 33))
    return _Reduce(scalar, (dtype, b'\x41' * 8))


def hidden_object_array():
    """A float64 dtype with object flags, and an array of raw bytes."""
    dtype = crafted_dtype('f8', (3, '<', None, None, None, -1, -1, 1))
    return _Reduce(_reconstruct, (np.ndarray, (0, ), b'b'),
                   (1, (2, ), dtype, False, b'\x41' * 16))


def _mutating_state(buffer):
    return dict(max_length=10, _log_history=np.array([1., 3.]),
                _count_history=np.array([1, 1]),
                statistics_methods={'mean': HistoryBuffer.max})


class mutating_history_buffer:
    """While active, a pickled HistoryBuffer's statistics map 'mean' to
    ``max``: mmengine's ``__setstate__`` would install that for every
    HistoryBuffer in the process that loads it."""

    def __enter__(self):
        self.saved = HistoryBuffer.__getstate__
        HistoryBuffer.__getstate__ = _mutating_state
        return HistoryBuffer([1., 3.], [1, 1])

    def __exit__(self, *exc):
        HistoryBuffer.__getstate__ = self.saved


class CreatesFile:
    """Unpickling this calls ``open(target, 'w')``, creating ``target``."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, 'w'))


def _payloads(marker):
    """name -> the checkpoint dict holding the payload."""
    plain = {'state_dict': {'w': torch.ones(2)}}
    return {
        'hidden_object_scalar.pth':
        dict(plain, meta={'best_score': hidden_object_scalar()}),
        'hidden_object_array.pth':
        dict(plain, meta={'class_weights': hidden_object_array()}),
        'object_array.pth':
        dict(plain, meta={'x': np.array([1, 'a'], dtype=object)}),
        'structured_array.pth':
        dict(plain, meta={'x': np.zeros(2, dtype=[('a', 'f8')])}),
        'reduce_in_meta.pth':
        dict(plain, meta={'dataset_meta': {'classes': [CreatesFile(
            marker)]}}),
        'reduce_in_message_hub.pth':
        dict(plain, message_hub={'runtime_info': {'eta': CreatesFile(
            marker)}}),
        'reduce_in_optimizer.pth':
        dict(plain, optimizer={'state': {0: {'exp_avg': torch.zeros(2),
                                             'step': CreatesFile(marker)}},
                               'param_groups': [{'lr': 1e-3}]}),
    }


def write_all(folder):
    """Write every crafted file into ``folder``; return their names."""
    names = []
    for name, payload in _payloads(osp.join(folder, MARKER)).items():
        torch.save(payload, osp.join(folder, name))
        names.append(name)
    name = 'history_buffer_mutation.pth'
    with mutating_history_buffer() as buffer:
        torch.save({'state_dict': {'w': torch.ones(2)},
                    'message_hub': {'log_scalars': {'train/loss': buffer}}},
                   osp.join(folder, name))
    return names + [name]


def history_statistics_intact():
    buffer = HistoryBuffer([1., 3.], [1, 1])
    return bool(buffer.statistics('mean') == 2.
                and buffer.statistics('max') == 3. and buffer.mean() == 2.)


class _FakePaviModel:
    """Stands in for a pavi modelcloud entry: ``download`` copies the file."""

    def __init__(self, folder, name):
        self.folder, self.name = folder, name

    def download(self, path):
        shutil.copy(osp.join(self.folder, self.name), path)


class _FakePetrel:
    """Stands in for mmengine's petrel (s3://) backend: reads local files."""

    def __init__(self, folder, **kwargs):
        self.folder = folder

    def get(self, filepath):
        with open(osp.join(self.folder, filepath.split('/')[-1]), 'rb') as f:
            return f.read()


def _paths(folder):
    """loading path -> function(name) that loads the crafted file."""
    from mmengine.fileio.backends import backends
    from mmengine.runner.checkpoint import _load_checkpoint

    from tlalign_mm.checkpoint_safety import (
        install_safe_loaders,
        load_checkpoint_weights_only,
    )
    from tlalign_mm.downstream.strict_pretrained import (
        load_backbone_state_dict,
    )

    def forced(fn):

        def load(name):
            os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD'] = '1'
            try:
                return fn(name)
            finally:
                del os.environ['TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD']

        return load

    def openmmlab(name):
        return _load_checkpoint(f'open-mmlab://crafted/{name}')

    def https(name):
        return _load_checkpoint(f'https://example.invalid/{name}')

    def s3(name):
        saved = backends.get('petrel')
        backends['petrel'] = lambda **kw: _FakePetrel(folder)
        try:
            return _load_checkpoint(f's3://bucket/{name}')
        finally:
            backends['petrel'] = saved

    def pavi(name):
        module = types.ModuleType('pavi')
        module.modelcloud = types.SimpleNamespace(
            get=lambda path: _FakePaviModel(folder, path.split('/')[-1]))
        sys.modules['pavi'] = module
        try:
            return _load_checkpoint(f'pavi://crafted/{name}')
        finally:
            del sys.modules['pavi']

    return {
        'torch': lambda name: torch.load(osp.join(folder, name),
                                         weights_only=True),
        'direct': lambda name: load_checkpoint_weights_only(
            osp.join(folder, name)),
        'install': lambda name: install_safe_loaders(),
        'mmengine': lambda name: _load_checkpoint(osp.join(folder, name)),
        'env': forced(lambda name: _load_checkpoint(osp.join(folder, name))),
        'open-mmlab': forced(openmmlab),
        'https': forced(https),
        's3': forced(s3),
        'pavi': forced(pavi),
        'pretrained': forced(lambda name: load_backbone_state_dict(
            osp.join(folder, name), prefix='')),
    }


def _prepare_caches(folder, names):
    """``$MMENGINE_HOME/open_mmlab.json`` and the torch hub cache, both
    pointing at the crafted files (set before mmengine reads them)."""
    home = osp.join(folder, 'mmengine_home')
    os.makedirs(home, exist_ok=True)
    with open(osp.join(home, 'open_mmlab.json'), 'w') as f:
        json.dump({f'crafted/{n}': osp.join(folder, n) for n in names}, f)
    os.environ['MMENGINE_HOME'] = home
    cache = osp.join(folder, 'torch_home', 'hub', 'checkpoints')
    os.makedirs(cache, exist_ok=True)
    for n in names:
        shutil.copy(osp.join(folder, n), osp.join(cache, n))
    os.environ['TORCH_HOME'] = osp.join(folder, 'torch_home')


def main(folder, names):
    _prepare_caches(folder, names)
    from mmengine.runner.checkpoint import CheckpointLoader

    import tlalign_mm  # noqa: F401  (allow-list only)
    print(json.dumps({'local_loader_after_import': CheckpointLoader.
                      _get_checkpoint_loader('x.pth').__name__}), flush=True)
    paths = _paths(folder)
    for path, load in paths.items():
        for name in names if path != 'install' else ['-']:
            # printed first: if the load kills the process, the test names
            # the case from the last line
            print(json.dumps({'start': [name, path]}), flush=True)
            try:
                load(name)
                outcome = 'loaded'
            except Exception as error:  # noqa: BLE001  reported, not raised
                text = str(error).strip().splitlines()
                outcome = (f'refused: {type(error).__name__}: '
                           f'{text[0] if text else ""}')
            print(json.dumps({
                'file': name, 'path': path, 'outcome': outcome,
                'statistics_intact': history_statistics_intact(),
                'payload_ran': osp.exists(osp.join(folder, MARKER)),
            }), flush=True)
    print(json.dumps({'done': True}), flush=True)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
