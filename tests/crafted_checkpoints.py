"""Hostile checkpoint files, and a runner that loads them on every path.

Each case writes a file a real attacker could write (``torch.save`` of
objects whose ``__reduce__`` is the payload, or bytes edited after the
save). They are loaded in a *subprocess* (``python -m
tests.crafted_checkpoints DIR``, with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``):
a file that crashes the process kills that process, not pytest. It prints
one JSON line per (file, loading path) and finally ``{"done": true}``.

Loading paths (after the config opt-in line's import,
``tlalign_mm.checkpoint.install``):

* ``mmengine``: mmengine's ``load_checkpoint`` (what ``load_from``,
  ``--resume`` and ``tools/test.py`` reach);
* ``https``: an ``https://`` URL whose file is in the torch hub cache;
* ``open-mmlab``: an ``open-mmlab://`` name resolved through mmengine's
  model-zoo table to that URL;
* ``pretrained``: the strict ``init_cfg=dict(type='Pretrained',
  _scope_='tlalign_mm')`` on a model.
"""
import collections
import json
import os
import os.path as osp
import shutil
import sys
import zipfile

import numpy as np
import torch
from mmengine.logging import HistoryBuffer

try:  # numpy >= 2.0
    from numpy._core.multiarray import _reconstruct, scalar
except ImportError:  # pragma: no cover
    from numpy.core.multiarray import _reconstruct, scalar

#: every code-running payload creates this file in the folder
MARKER = 'payload_ran.txt'
#: the size the deflated record inflates to
BOMB_BYTES = 300 * 2**20


class _Reduce:
    """Pickles as ``fn(*args)``, then ``BUILD state`` if given."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        if self.state is None:
            return (self.fn, self.args)
        return (self.fn, self.args, self.state)


def _dtype(spec, state):
    return _Reduce(np.dtype, (spec, False, True), state)


def hidden_object_array():
    """A float64 array whose dtype's pickled flags claim it holds Python
    objects: numpy would read the raw bytes as object pointers."""
    return _Reduce(_reconstruct, (np.ndarray, (0, ), b'b'),
                   (1, (2, ), _dtype('f8', (3, '<', None, None, None, -1, -1,
                                            1)), False, b'A' * 16))


def _mutating_state(buffer):
    return dict(max_length=10, _log_history=np.array([1., 3.]),
                _count_history=np.array([1, 1]),
                statistics_methods={'mean': HistoryBuffer.max})


class _Exec:
    """``getattr(getattr(getattr, '__self__'), 'exec')``: the builtins
    module's exec, reached from ``builtins.getattr``, called through
    ``torch._tensor._rebuild_from_type_v2`` (allowed by torch)."""

    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        builtins = _Reduce(getattr, (getattr, '__self__'))
        return (torch._tensor._rebuild_from_type_v2,
                (_Reduce(getattr, (builtins, 'exec')), torch.Tensor,
                 (self.code, ), {}))


def _tensor(size, offset, stride):
    storage = torch.ones(4).untyped_storage()
    return _Reduce(torch._utils._rebuild_tensor_v2,
                   (torch.storage.TypedStorage(
                       wrap_storage=storage, dtype=torch.float32,
                       _internal=True), offset, size, stride, False,
                    collections.OrderedDict()))


def _payloads(marker):
    """name -> what ``torch.save`` writes."""
    plain = {'w': torch.ones(2)}
    system = _Reduce(os.system, (f'touch {marker}', ))
    return {
        'reduce_system.pth': dict(state_dict=plain, meta={'x': system}),
        'reduce_open_in_hub.pth': dict(
            state_dict=plain,
            message_hub={'runtime_info': {'eta': _Reduce(open, (marker,
                                                                'w'))}}),
        'exec_via_getattr.pth': dict(state_dict=plain, meta={
            'x': _Exec(f'open({marker!r}, "w").close()')}),
        'hidden_object_scalar.pth': dict(state_dict=plain, meta={
            'best': _Reduce(scalar, (_dtype('S8', (3, '|', None, None, None,
                                                   8, 1, 33)), b'A' * 8))}),
        'hidden_object_array.pth': dict(state_dict=plain, meta={
            'x': hidden_object_array()}),
        'object_array.pth': dict(state_dict=plain, meta={
            'x': np.array([1, 'a'], dtype=object)}),
        'header_huge.pth': dict(state_dict={'w': _tensor((10**12, ), 0,
                                                         (1, ))}),
        'header_zero_stride.pth': dict(state_dict={'w': _tensor(
            (10**12, ), 0, (0, ))}),
        'header_offset.pth': dict(state_dict={'w': _tensor((4, ), 10**9,
                                                           (1, ))}),
        'header_negative_stride.pth': dict(state_dict={'w': _tensor(
            (4, ), 3, (-1, ))}),
        'top_level_list.pth': [torch.ones(2)],
        'meta_epoch_negative.pth': dict(state_dict=plain,
                                        meta=dict(epoch=-5, iter=10)),
        'meta_iter_absurd.pth': dict(state_dict=plain,
                                     meta=dict(epoch=1, iter=1e15)),
    }


def _deflated(path):
    """A checkpoint whose one tensor record (300 MB of zeros) is deflated
    to a few hundred kB: a valid archive that inflates when loaded."""
    torch.save({'state_dict': {'w': torch.zeros(BOMB_BYTES // 4)}}, path)
    with zipfile.ZipFile(path) as z:
        records = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(path, 'w') as z:
        for info, data in records:
            big = len(data) == BOMB_BYTES
            info.compress_type = zipfile.ZIP_DEFLATED if big else \
                zipfile.ZIP_STORED
            z.writestr(info, data)


def _bit_flipped(path):
    torch.save({'state_dict': {'w': torch.ones(2)}}, path)
    data = bytearray(open(path, 'rb').read())
    at = data.index(b'data.pkl') + 40  # inside the pickle's bytes
    data[at] ^= 0xFF
    open(path, 'wb').write(bytes(data))


def write_all(folder):
    """Write every crafted file into ``folder``; return their names."""
    names = []
    for name, payload in _payloads(osp.join(folder, MARKER)).items():
        torch.save(payload, osp.join(folder, name))
        names.append(name)
    # a HistoryBuffer whose pickled statistics map 'mean' to max: mmengine's
    # __setstate__ would install that for every HistoryBuffer
    saved, HistoryBuffer.__getstate__ = HistoryBuffer.__getstate__, \
        _mutating_state
    try:
        torch.save({'state_dict': {'w': torch.ones(2)}, 'message_hub': {
            'log_scalars': {'loss': HistoryBuffer([1.], [1])},
            'runtime_info': {}, 'resumed_keys': {}}},
            osp.join(folder, 'history_buffer_mutation.pth'))
    finally:
        HistoryBuffer.__getstate__ = saved
    _deflated(osp.join(folder, 'deflated_record.pth'))
    _bit_flipped(osp.join(folder, 'bit_flipped.pth'))
    os.makedirs(osp.join(folder, 'a_directory.pth'), exist_ok=True)
    return names + ['history_buffer_mutation.pth', 'deflated_record.pth',
                    'bit_flipped.pth', 'a_directory.pth']


def history_statistics_intact():
    buffer = HistoryBuffer([1., 3.], [1, 1])
    return bool(buffer.statistics('mean') == 2. and buffer.mean() == 2.)


def _paths(folder):
    """loading path -> function(name) that loads the crafted file."""
    from mmengine.registry import MODELS
    from mmengine.runner import load_checkpoint

    model = torch.nn.Linear(2, 1)
    init = dict(type='Pretrained', _scope_='tlalign_mm',
                prefix='', strict=True)

    def pretrained(name):
        from mmengine.model import BaseModule

        class Net(BaseModule):

            def __init__(self):
                super().__init__(init_cfg=dict(init, checkpoint=osp.join(
                    folder, name)))
                self.w = torch.nn.Parameter(torch.ones(2))

        MODELS  # registries imported
        Net().init_weights()

    return {
        'mmengine': lambda name: load_checkpoint(model, osp.join(folder,
                                                                 name)),
        'https': lambda name: load_checkpoint(
            model, f'https://example.invalid/{name}'),
        'open-mmlab': lambda name: load_checkpoint(
            model, f'open-mmlab://crafted/{name}'),
        'pretrained': pretrained,
    }


def _prepare_caches(folder, names):
    """The torch hub cache holds the files; mmengine's open-mmlab table
    maps ``crafted/NAME`` to their URLs."""
    cache = osp.join(folder, 'torch_home', 'hub', 'checkpoints')
    os.makedirs(cache, exist_ok=True)
    for n in names:
        if osp.isfile(osp.join(folder, n)):
            shutil.copy(osp.join(folder, n), osp.join(cache, n))
        else:
            os.makedirs(osp.join(cache, n), exist_ok=True)
    os.environ['TORCH_HOME'] = osp.join(folder, 'torch_home')
    home = osp.join(folder, 'mmengine_home')
    os.makedirs(home, exist_ok=True)
    with open(osp.join(home, 'open_mmlab.json'), 'w') as f:
        json.dump({f'crafted/{n}': f'https://example.invalid/{n}'
                   for n in names}, f)
    os.environ['MMENGINE_HOME'] = home


def main(folder, names):
    import resource
    _prepare_caches(folder, names)
    import tlalign_mm  # noqa: F401
    import tlalign_mm.checkpoint.install  # noqa: F401  the opt-in line
    for path, load in _paths(folder).items():
        for name in names:
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
                'max_rss_mb': resource.getrusage(
                    resource.RUSAGE_SELF).ru_maxrss // 1024,
            }), flush=True)
    print(json.dumps({'done': True}), flush=True)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
