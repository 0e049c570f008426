"""Hostile checkpoint files, and a runner that loads them on every path.

Each case writes a file a real attacker could write (``torch.save`` of
objects whose ``__reduce__`` is the payload, or bytes edited after the
save). They are loaded in a *subprocess* (``python -m
tests.crafted_checkpoints DIR NAMES``, with
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``): a file that crashes or hangs the
process ends that process, not pytest. It prints one JSON line per (file,
loading path) and finally ``{"done": true}``.

Loading paths:

* ``build_model``: ``tlalign_mm.analysis.session.build_model``, before
  anything installed the safe loader;

then, after the config opt-in line's import (``tlalign_mm.checkpoint.
install``):

* ``mmengine``: mmengine's ``load_checkpoint`` (what ``load_from``,
  ``--resume``, ``tools/test.py`` and the inferencers' weights reach);
* ``https``: an ``https://`` URL whose file is in the torch hub cache;
* ``open-mmlab``: an ``open-mmlab://`` name resolved through mmengine's
  model-zoo table to that URL;
* ``pretrained``: the strict ``init_cfg=dict(type='Pretrained',
  _scope_='tlalign_mm')`` on a model; ``mmengine-pretrained``: mmengine's
  own ``init_cfg=dict(type='Pretrained')``;
* ``mmseg-inferencer`` / ``mmdet-inferencer``: ``MMSegInferencer`` /
  ``DetInferencer`` given the file as weights and no config (mmengine's
  ``BaseInferencer`` then reads the config from the checkpoint);
* ``export`` / ``label_maps``: ``tools/export_backbone.py`` and
  ``tools/analysis/label_maps.py``, what they print on stderr.

``python -m tests.crafted_checkpoints --runs DIR`` runs :data:`RUNS`:
checkpoints crafted from a real one, resumed or tested through
``tools/train.py``, ``tools/test.py`` and mmengine's own ``Runner``.
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
ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEMO = osp.join(ROOT, 'configs', 'demo', 'vit-tiny-p4_1xb64-tlalign_digits.py')


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


def tensor_hub(**info):
    """A message hub that is a tensor whose attributes (which
    ``_rebuild_from_type_v2`` sets) are what ``MessageHub.load_state_dict``
    copies."""
    hub = torch.zeros(1)
    hub._runtime_info, hub._log_scalars, hub._resumed_keys = info, {}, {}
    return hub


def shared_list(depth):
    """A list holding one list twice, ``depth`` levels deep (the pickle
    memo writes each level once)."""
    value = []
    for _ in range(depth):
        value = [value, value]
    return value


def rng_at(position):
    """A ``resume_state`` whose numpy MT19937 state is at ``position``."""
    from tlalign_mm.checkpoint.plain import capture_rng
    rng = capture_rng()
    name, keys, _, gauss, cached = rng['numpy']
    return dict(rng=dict(rng, numpy=(name, keys, position, gauss, cached)),
                sampler_seed=0)


def _payloads(marker):
    """name -> what ``torch.save`` writes."""
    plain = {'w': torch.ones(2)}
    system = _Reduce(os.system, (f'touch {marker}', ))
    code = f"model = dict(type='x')\n__import__('os').system('touch {marker}')"
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
        # issue 30, case 1: config text mmengine's BaseInferencer runs
        'config_code.pth': dict(state_dict=plain, meta=dict(cfg=code),
                                message_hub=dict(runtime_info=dict(cfg=code))),
        # case 2: a message hub that is a tensor with attributes
        'hub_tensor.pth': dict(state_dict=plain, message_hub=tensor_hub()),
        # case 4: 64 levels of one list held twice: 2**64 paths
        'shared_list.pth': dict(state_dict=plain,
                                meta=dict(dataset_meta=shared_list(64))),
        # case 6: numpy MT19937 positions past its 624-word key
        'rng_position_625.pth': dict(state_dict=plain,
                                     resume_state=rng_at(625)),
        'rng_position_huge.pth': dict(state_dict=plain,
                                      resume_state=rng_at(2**31 - 1)),
        # case 7
        'sparse_tensor.pth': dict(state_dict=dict(
            w=torch.ones(2).to_sparse())),
        'quantized_tensor.pth': dict(state_dict=dict(
            w=torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8))),
        'hub_list.pth': dict(state_dict=plain, message_hub=[]),
        'config_unhashable.pth': dict(state_dict=plain,
                                      meta=dict(cfg='model = {[1]: 2}')),
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
    with open(osp.join(folder, 'not_zip.pth'), 'wb') as f:
        f.write(b'\x80\x02}q\x00.')  # a bare pickle: legacy torch.save
    return names + ['history_buffer_mutation.pth', 'deflated_record.pth',
                    'bit_flipped.pth', 'a_directory.pth', 'not_zip.pth']


def history_statistics_intact():
    buffer = HistoryBuffer([1., 3.], [1, 1])
    return bool(buffer.statistics('mean') == 2. and buffer.mean() == 2.)


def _error_lines(stderr):
    """What a tool said from its ``error:`` line on (before it: warnings)."""
    return stderr[max(stderr.find('error: '), 0):].strip()


def _tool(tool, argv):
    """A tool's ``main`` in this process: what it printed on stderr from
    its ``error:`` line on, or 'ran'."""
    import contextlib
    import io
    err = io.StringIO()
    try:  # as `python tools/...`: export_backbone.py runs main in run_tool
        with contextlib.redirect_stderr(err):
            getattr(tool, 'run_tool', lambda main, *a: main(*a))(tool.main,
                                                                 argv)
        return 'ran'
    except SystemExit:
        return _error_lines(err.getvalue())


def _tools(*relpaths):
    """``tools/<relpath>`` modules, loaded before the opt-in line's import
    (as when a tool reads a config that has it)."""
    from tests.tool_scripts import load_tool
    return [load_tool(relpath) for relpath in relpaths]


def _paths(folder, export, label_maps):
    """loading path -> function(name) that loads the crafted file."""
    from mmengine.registry import MODELS
    from mmengine.runner import load_checkpoint

    model = torch.nn.Linear(2, 1)
    init = dict(type='Pretrained', _scope_='tlalign_mm',
                prefix='', strict=True)

    def pretrained(name, init=init):
        from mmengine.model import BaseModule

        class Net(BaseModule):

            def __init__(self):
                super().__init__(init_cfg=dict(init, checkpoint=osp.join(
                    folder, name)))
                self.w = torch.nn.Parameter(torch.ones(2))

        MODELS  # registries imported
        Net().init_weights()

    def inferencer(name, library):
        if library == 'mmseg':
            from mmseg.apis import MMSegInferencer as Inferencer
        else:
            from mmdet.apis import DetInferencer as Inferencer
        Inferencer(model=None, weights=osp.join(folder, name), device='cpu')

    return {
        'mmengine': lambda name: load_checkpoint(model, osp.join(folder,
                                                                 name)),
        'https': lambda name: load_checkpoint(
            model, f'https://example.invalid/{name}'),
        'open-mmlab': lambda name: load_checkpoint(
            model, f'open-mmlab://crafted/{name}'),
        'pretrained': pretrained,
        'mmengine-pretrained': lambda name: pretrained(name, dict(
            type='Pretrained')),
        'mmseg-inferencer': lambda name: inferencer(name, 'mmseg'),
        'mmdet-inferencer': lambda name: inferencer(name, 'mmdet'),
        'export': lambda name: _tool(export, [
            osp.join(folder, name), osp.join(folder, 'export_out.pth'),
            '--prefix', '']),
        'label_maps': lambda name: _tool(label_maps, [
            DEMO, osp.join(folder, name), '--work-dir',
            osp.join(folder, 'label_maps'), '--cfg-options',
            'test_dataloader.dataset.serialize_data=False']),
    }


def _build_model(folder):
    """``build_model`` of the analysis session (the demo ViT), before any
    install()."""
    from tlalign_mm.analysis.session import build_model, load_config
    cfg = load_config(DEMO)
    return lambda name: build_model(cfg, osp.join(folder, name))


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


def _report(name, path, load, folder):
    """Load ``name`` through ``path``; print what happened (JSON)."""
    import resource

    # printed first: if the load kills the process, the test names the
    # case from the last line
    emit({'start': [name, path]})
    try:
        outcome = load(name)
        outcome = outcome if isinstance(outcome, str) else 'loaded'
    except Exception as error:  # noqa: BLE001  reported, not raised
        text = str(error).strip().splitlines()
        outcome = f'refused: {type(error).__name__}: {text[0] if text else ""}'
    emit({'file': name, 'path': path, 'outcome': outcome,
          'statistics_intact': history_statistics_intact(),
          'payload_ran': osp.exists(osp.join(folder, MARKER)),
          'max_rss_mb': resource.getrusage(
              resource.RUSAGE_SELF).ru_maxrss // 1024})


def main(folder, names):
    _prepare_caches(folder, names)
    for name in names:  # nothing installed yet
        _report(name, 'build_model', _build_model(folder), folder)
    tools = _tools('export_backbone.py', 'analysis/label_maps.py')
    import tlalign_mm.checkpoint.install  # noqa: F401  the opt-in line
    for path, load in _paths(folder, *tools).items():
        for name in names:
            _report(name, path, load, folder)
    emit({'done': True})


#: case -> the paths it runs through: ``tools/train.py --resume FILE``,
#: ``tools/train.py --resume`` (the file in the work dir), mmengine's own
#: ``Runner`` (the config opts in) with ``load_from=FILE`` or auto-resume,
#: ``tools/test.py CONFIG FILE``
RUNS = {
    'hub_tensor': ('train FILE', 'train auto', 'runner FILE'),
    'hub_list': ('train FILE', ),
    'best_ckpt_victim': ('train FILE', 'runner FILE'),
    'record_outside': ('train auto', 'runner auto'),
    'symlink_outside': ('train auto', 'runner auto'),
    'sparse_tensor': ('test', ),
    'missing_file': ('train FILE', ),
}
#: every run: 2 epochs, validation and save_best after each
OPTIONS = {'train_cfg.max_epochs': 2, 'train_cfg.val_interval': 1,
           'default_hooks.checkpoint.save_best': 'auto'}


def emit(record):
    """One result line (other output of the runs is mmengine's log)."""
    print('RESULT ' + json.dumps(record), flush=True)


def _crafted(case, ckpt, victim):
    """The checkpoint of ``case``, from a real epoch-1 checkpoint."""
    info = dict(ckpt['message_hub']['runtime_info'], best_ckpt=victim,
                best_score=-1.0)  # the next validation is a new best
    if case == 'hub_tensor':
        return dict(ckpt, message_hub=tensor_hub(**info))
    if case == 'hub_list':
        return dict(ckpt, message_hub=[])
    if case == 'best_ckpt_victim':
        return dict(ckpt, message_hub=dict(ckpt['message_hub'],
                                           runtime_info=info))
    state = dict(ckpt['state_dict'])  # sparse_tensor
    key = next(iter(state))
    state[key] = state[key].to_sparse()
    return dict(ckpt, state_dict=state)


def _work_dir(run, case, path, first):
    """``run/work`` as the case has it; returns the crafted file."""
    work, file = osp.join(run, 'work'), osp.join(run, 'crafted.pth')
    os.makedirs(work)
    if case == 'record_outside':  # names another run's file, has none
        with open(osp.join(work, 'last_checkpoint'), 'w') as f:
            f.write(first)
    elif case == 'symlink_outside':  # its own name, a link out
        os.symlink(first, osp.join(work, 'epoch_1.pth'))
        with open(osp.join(work, 'last_checkpoint'), 'w') as f:
            f.write('epoch_1.pth')
    elif case != 'missing_file':
        torch.save(_crafted(case, torch.load(first, weights_only=True),
                            osp.join(run, 'victim')), file)
    if path == 'train auto' and osp.exists(file):  # dropped into it
        shutil.copy(file, osp.join(work, 'epoch_1.pth'))
        with open(osp.join(work, 'last_checkpoint'), 'w') as f:
            f.write(osp.join(work, 'epoch_1.pth'))
    return work, file


def _run(root, case, path, first, config, tools):
    """``case`` through ``path``: what it printed on stderr (a tool that
    ended), raised (the Runner) or the epoch training started at; whether
    a Runner was built; whether the victim folder is intact."""
    import contextlib
    import io

    from mmengine.config import Config
    from mmengine.hooks import Hook
    from mmengine.runner import Runner

    run = osp.join(root, f'{case}-{path.replace(" ", "-")}')
    os.makedirs(osp.join(run, 'victim'))
    open(osp.join(run, 'victim', 'keep.txt'), 'w').close()
    work, file = _work_dir(run, case, path, first)
    own = osp.join(run, f'{case}_{path.replace(" ", "_")}.py')  # own name
    shutil.copy(config, own)
    starts, err = [], io.StringIO()

    class Start(Hook):
        def before_train(self, runner):
            starts.append(runner.epoch)

    def build(cfg):
        runner = Runner.from_cfg(cfg)
        runner.register_hook(Start())
        return runner

    try:
        with contextlib.redirect_stderr(err):
            if path.startswith('runner'):
                cfg = Config.fromfile(own)
                cfg.merge_from_dict(dict(OPTIONS, work_dir=work, resume=True,
                                         load_from=file if 'FILE' in path
                                         else None))
                build(cfg).train()
            else:
                tool = tools['test' if path == 'test' else 'train']
                tool.build_runner = build
                sys.argv = [tool.__file__, own, *{
                    'test': [file], 'train FILE': ['--resume', file],
                    'train auto': ['--resume']}[path], '--work-dir', work,
                    '--cfg-options', *(f'{k}={v}' for k, v in
                                       OPTIONS.items())]
                tool.run_tool(tool.main)
        outcome = f'trained from epoch {starts[0]}' if starts else 'ran'
    except SystemExit:
        outcome = _error_lines(err.getvalue())
    except Exception as error:  # noqa: BLE001  reported, not raised
        outcome = f'raised {type(error).__name__}: {error}'.splitlines()[0]
    return dict(case=case, path=path, outcome=outcome, built=bool(starts) or
                any(d[:2] == '20' for d in os.listdir(work)),
                victim_intact=osp.exists(osp.join(run, 'victim', 'keep.txt')))


def runs(root):
    """Every case of :data:`RUNS` through its paths, on the tiny run of
    ``tests/engine/tiny_run.py`` (after the tools, this process imported
    the opt-in line, as a config's ``custom_imports`` does when it is
    read)."""
    from tests.engine.tiny_run import write_config, write_images
    tools = dict(zip(('train', 'test'), _tools('train.py', 'test.py')))
    train = tools['train']
    import tlalign_mm.checkpoint.install  # noqa: F401  the opt-in line
    write_images(osp.join(root, 'data'))
    config = osp.join(root, 'tiny.py')
    write_config(config, osp.join(root, 'data'))
    sys.argv = [train.__file__, config, '--work-dir', osp.join(root, 'first'),
                '--cfg-options', 'train_cfg.max_epochs=2',
                'default_hooks.checkpoint.max_keep_ckpts=-1']
    train.main()
    first = osp.join(root, 'first', 'epoch_1.pth')
    for case, paths in RUNS.items():
        for path in paths:
            emit(_run(root, case, path, first, config, tools))
    emit({'done': True})


if __name__ == '__main__':
    if sys.argv[1] == '--runs':
        runs(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2:])
