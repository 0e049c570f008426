"""Hostile checkpoint files, loaded on every path in one subprocess.

``python -m tests.crafted_checkpoints DIR`` (``tests/test_checkpoint_safety
.py`` runs it with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``: a crash or hang
ends that process, not pytest) checks that ``import tlalign_mm`` changes
nothing, writes :func:`files`, loads each through ``build_model`` (nothing
installed yet) and, after the config opt-in line's import, every path of
:func:`paths`, then runs :data:`RUNS`. It prints ``RESULT {json}`` lines,
the last ``{"done": true}``.
"""
import contextlib
import io
import json
import os
import os.path as osp
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer
from mmengine.model import BaseModule
from mmengine.registry import DefaultScope
from mmengine.runner import CheckpointLoader, Runner, load_checkpoint
from numpy._core.multiarray import _reconstruct

from tests.cli import ROOT, run_script, tool_main
from tests.engine.tiny_run import write_config, write_images

MARKER = 'payload_ran.txt'  # every code-running payload creates it
DEMO = osp.join(ROOT, 'configs', 'demo', 'vit-tiny-p4_1xb64-tlalign_digits.py')


class _Reduce:
    """Pickles as ``fn(*args)``, then ``BUILD state`` if given."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        return (self.fn, self.args) + ((self.state, ) if self.state else ())


def hidden_object_array():
    """A float64 array whose dtype's pickled flags claim Python objects."""
    dtype = _Reduce(np.dtype, ('f8', False, True), (
        3, '<', None, None, None, -1, -1, 1))
    return _Reduce(_reconstruct, (np.ndarray, (0, ), b'b'), (
        1, (2, ), dtype, False, b'A' * 16))


def shared_list(depth):
    """One list held twice, ``depth`` levels deep: 2**depth paths."""
    value = []
    for _ in range(depth):
        value = [value, value]
    return value


def rng_at(position):
    """A ``resume_state`` whose numpy MT19937 is at ``position``."""
    from tlalign_mm.checkpoint.plain import capture_rng
    rng = capture_rng()
    numpy = rng['numpy'][:2] + (position, ) + rng['numpy'][3:]
    return dict(rng=dict(rng, numpy=numpy), sampler_seed=0)


def _deflated(path):
    """A ``torch.save`` archive with its 1 MB record deflated."""
    torch.save({'state_dict': {'w': torch.zeros(2**18)}}, path)
    with zipfile.ZipFile(path) as z:
        records = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(path, 'w') as z:
        for info, data in records:
            info.compress_type = 8 if len(data) > 2**19 else 0  # deflate
            z.writestr(info, data)


def shared_views(path):
    """log_scalars: 50 HistoryBuffers viewing one 1 MB storage pair (each
    expanded on its own: 16 MB of views from 2 MB)."""
    log, count = torch.zeros(2**17, dtype=torch.float64), torch.ones(
        2**17, dtype=torch.int64)
    torch.save(dict(state_dict={'w': torch.ones(2)}, message_hub=dict(
        log_scalars={f'k{i}': dict(log=log[:], count=count[:],
                                   max_length=2**17) for i in range(50)})),
               path)


P = 2**61 - 1  # k * P: one hash for every k


def files(marker):
    """name -> (what ``torch.save`` writes, or a function writing the file;
    what its refusal says, or None: it loads, without what no checkpoint
    holds)."""
    def ckpt(**fields):
        return dict(state_dict={'w': torch.ones(2)}, **fields)

    rng, state = rng_at(0)['rng'], 'resume_state is not a generator state'

    def bad_rng(**part):  # a generator's state replaced by ``part``
        return ckpt(resume_state=dict(rng=dict(rng, **part))), state
    code = f"model = dict(type='x')\n__import__('os').system('touch {marker}')"
    builtins = _Reduce(getattr, (getattr, '__self__'))  # exec via getattr
    run = _Reduce(torch._tensor._rebuild_from_type_v2, (_Reduce(getattr, (
        builtins, 'exec')), torch.Tensor, (f'open({marker!r}, "w")', ), {}))
    # mmengine's __setstate__ would map 'mean' to max for every buffer
    mutation = dict(max_length=10, _log_history=np.array([1., 3.]),
                    _count_history=np.array([1, 1]),
                    statistics_methods={'mean': HistoryBuffer.max})
    # a message hub that is a tensor with the attributes (set by
    # _rebuild_from_type_v2) MessageHub.load_state_dict copies
    hub = torch.zeros(1)
    hub._runtime_info, hub._log_scalars, hub._resumed_keys = {}, {}, {}
    return {
        'reduce_system': (ckpt(meta={'x': _Reduce(os.system, (
            f'touch {marker}', ))}), 'allow-list (posix.system)'),
        'reduce_open_in_hub': (ckpt(message_hub={'runtime_info': {
            'eta': _Reduce(open, (marker, 'w'))}}), 'allow-list (io.open)'),
        'exec_via_getattr': (ckpt(meta={'x': run}), 'corrupt or crafted'),
        'hidden_object_array': (ckpt(meta={'x': hidden_object_array()}),
                                None),
        'history_buffer_mutation': (ckpt(message_hub={'log_scalars': {
            'loss': _Reduce(HistoryBuffer, (), mutation)}}), None),
        # 4 bytes of storage that claim 4 TB (stride 0)
        'header_zero_stride': (dict(state_dict={'w': torch.ones(1).expand(
            10**12)}), 'more than its storage holds'),
        'top_level_list': ([torch.ones(2)], 'it holds a list'),
        'meta_epoch_negative': (ckpt(meta=dict(epoch=-5, iter=10)),
                                "meta['epoch'] = -5 is not an integer"),
        # issue 30, case 1: config text mmengine's BaseInferencer runs
        'config_code': (ckpt(meta=dict(cfg=code), message_hub=dict(
            runtime_info=dict(cfg=code))), None),
        'config_unhashable': (ckpt(meta=dict(cfg='model = {[1]: 2}')), None),
        # case 2: a message hub that is a tensor with attributes
        'hub_tensor': (ckpt(message_hub=hub),
                       'message_hub = a Tensor is not a message hub'),
        # case 4: 2**64 paths (2**24: the walk visits each list once)
        'shared_list': (ckpt(meta=dict(dataset_meta=shared_list(64))),
                        'nests deeper than 32 levels'),
        'shared_list_24': (ckpt(meta=dict(dataset_meta=shared_list(24))),
                           None),
        # case 6: generator states as each generator defines them
        'rng_position_625': (ckpt(resume_state=rng_at(625)), state),
        'rng_position_huge': (ckpt(resume_state=rng_at(2**31 - 1)), state),
        'rng_position_624': (ckpt(resume_state=rng_at(624)), None),
        'rng_numpy_key': bad_rng(numpy=('MT19937', [1, 2], 0, 0, 0.0)),
        'rng_torch_short': bad_rng(torch=torch.zeros(3, dtype=torch.uint8)),
        'rng_python_short': bad_rng(python=(3, (1, 2), None)),
        'sampler_seed_text': (ckpt(resume_state=dict(sampler_seed='0')),
                              state),
        'sparse_tensor': (dict(state_dict=dict(w=torch.ones(2).to_sparse())),
                          "state_dict['w'] is a torch.sparse_coo"),
        'quantized_tensor': (dict(state_dict=dict(w=torch.quantize_per_tensor(
            torch.ones(2), 0.1, 0, torch.qint8))), 'strided torch.qint8'),
        'deflated_record': (_deflated, 'are compressed or claim more bytes'),
        'a_directory': (os.makedirs, 'Is a directory'),
        'empty': (lambda p: open(p, 'wb').close(), 'not the zip archive'),
        'torchscript': (lambda p: torch.jit.save(torch.jit.script(
            torch.nn.Linear(2, 2)), p), 'load it with torch.jit.load'),
        'not_zip': (lambda p: open(p, 'wb').write(b'\x80\x02}q\x00.'),
                    'not the zip archive torch.save writes'),
        # issue 39, items 3, 4 and 10: bounded work before any check
        'hash_collision': (ckpt(meta=dict(dataset_meta={
            k * P: 0 for k in range(1, 5000)})), 'more than 4096 dict keys'),
        'hash_collision_pairs': (ckpt(meta=dict(x=_Reduce(OrderedDict, ([
            ((k * P, ), 0) for k in range(100)], )))), 'set built from a'),
        'shared_views': (shared_views, 'view more than 4 times'),
        'config_too_long': (ckpt(meta=dict(cfg='x = [' + '1,' * 2**16 + ']'
                                           )), None),
        'config_huge_int': (ckpt(meta=dict(cfg="model = dict(backbone=dict("
                                           "type='X', depth=0x" + 'f' * 5000 +
                                           '))')), None),
    }


def _stderr_of(call):
    """'ran', or what ``call`` (a tool) printed from its ``error:`` on."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            call()
        return 'ran'
    except SystemExit:
        return err.getvalue()[max(err.getvalue().find('error: '), 0):].strip()


def paths(folder):
    """loading path -> function(file name), after the opt-in line."""
    from mmdet.apis import DetInferencer
    from mmseg.apis import MMSegInferencer

    from tlalign_mm.models.pooled_timm_backbone import PooledTIMMBackbone
    label_maps = tool_main('analysis/label_maps.py')

    def pretrained(name, **init):
        net = BaseModule(init_cfg=dict(init, checkpoint=f'{folder}/{name}'))
        net.w = torch.nn.Parameter(torch.ones(2))
        net.init_weights()

    def mmengine(source):
        return load_checkpoint(torch.nn.Linear(2, 1), source)

    def timm_backbone(path):  # the inferencers set mmdet's scope
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            PooledTIMMBackbone('deit_tiny_patch16_224', img_size=32,
                               patch_size=8, depth=1, checkpoint_path=path)

    return {
        'mmengine': lambda n: mmengine(f'{folder}/{n}'),
        'open-mmlab': lambda n: mmengine(f'open-mmlab://crafted/{n}'),
        'pretrained': lambda n: pretrained(n, type='Pretrained', prefix='',
                                           _scope_='tlalign_mm', strict=True),
        'mmengine-pretrained': lambda n: pretrained(n, type='Pretrained'),
        'mmseg-inferencer': lambda n: MMSegInferencer(
            None, f'{folder}/{n}', device='cpu'),
        'mmdet-inferencer': lambda n: DetInferencer(
            None, f'{folder}/{n}', device='cpu'),
        'timm-backbone': lambda n: timm_backbone(f'{folder}/{n}'),
        'export': lambda n: _stderr_of(lambda: run_script(
            'export_backbone.py', [f'{folder}/{n}', f'{folder}/out.pth',
                                   '--prefix', ''])),
        'label_maps': lambda n: _stderr_of(lambda: label_maps([
            DEMO, f'{folder}/{n}', '--work-dir', f'{folder}/maps',
            '--num-images', '1', '--cfg-options',
            'test_dataloader.dataset.serialize_data=False'])),
    }


#: case -> how mmengine's own Runner (the config opted in), resuming, ends:
#: what it raised, or the epoch training started at (the run stops there
#: unless it must validate). ``FILE``: ``load_from``; ``auto``: the work
#: dir's. The victim folder stays.
REFUSED = 'raised CheckpointError: Refused the resumed training state: '
OVERFLOW = REFUSED + "state[0]['exp_avg'] is a (1,) torch.float32 tensor"
RUNS = {
    'best_ckpt_victim FILE': 'trained from epoch 1',
    'record_outside auto': 'trained from epoch 0',
    'symlink_outside auto': 'raised CheckpointError: --resume found',
    # issue 39: an optimizer state that the fused kernel would overflow
    # (fused from the file, or from a fused config), or that would change
    # how the run trains
    'overflow FILE': OVERFLOW,
    'overflow_fused_config auto': OVERFLOW,
    'flags FILE': "trained from epoch 1 with the config's flags",
    'step_negative FILE': REFUSED + "state[0]['step'] = -1.0 is not",
}
#: how a run's file differs from the first run's: its optimizer's
#: param_groups updates, its state[0] updates (each key as
#: ``state[0][key]``'s shape, or a value), config options
TAMPERED = {
    'overflow': (dict(fused=True), dict(exp_avg=(1, )), {}),
    'overflow_fused_config': (
        {}, dict(exp_avg=(1, )), {'optim_wrapper.optimizer.fused': True}),
    'flags': (dict(maximize=True, amsgrad=True, betas=(1, 1), lr='0.1',
                   foreach=True), dict(max_exp_avg_sq=None), {}),
    'step_negative': ({}, dict(step=torch.tensor(-1.0)), {}),
}


RUN_OPTIONS = {'train_cfg.max_epochs': 1, 'train_cfg.val_interval': 1,
               'param_scheduler': []}


class _Started(Exception):
    """Ends a run once training started."""


def _run(root, run, first):
    """The run ``run`` of :data:`RUNS`: (how it ended, victim intact)."""
    from tlalign_mm.checkpoint import load
    work, file, victim = (osp.join(root, run, n) for n in ('w', 'x.pth', 'v'))
    os.makedirs(osp.join(victim, 'keep')), os.makedirs(work)
    if run.startswith('symlink'):
        os.symlink(first, osp.join(work, 'epoch_1.pth'))
    ckpt = load(first)  # mmengine's HistoryBuffers dropped
    info = dict(ckpt['message_hub']['runtime_info'], best_ckpt=victim,
                best_score=-1.0)  # the next validation: a new best
    groups, state, options = TAMPERED.get(run.split()[0], ({}, {}, {}))
    for group in ckpt['optimizer']['param_groups']:
        group.update(groups)
    ckpt['optimizer']['state'][0].update({k: v if torch.is_tensor(
        v) else torch.zeros(v or ckpt['optimizer']['state'][0]['exp_avg'].shape
                            ) for k, v in state.items()})
    torch.save(dict(ckpt, message_hub=dict(ckpt['message_hub'],
                                           runtime_info=info)),
               osp.join(work, 'epoch_1.pth') if 'auto' in run and
               run.split()[0] in TAMPERED else file)
    with open(osp.join(work, 'last_checkpoint'), 'w') as f:
        f.write(first if run.startswith('record') else 'epoch_1.pth')
    cfg = Config.fromfile(osp.join(root, 'tiny.py'))
    cfg.merge_from_dict(dict(RUN_OPTIONS, work_dir=work, resume=True, **{
        'train_cfg.max_epochs': 2,
        'default_hooks.checkpoint.save_best': 'auto'}, **options))
    cfg.load_from, starts = file if 'FILE' in run else None, []

    class Start(Hook):
        def before_train(self, runner):
            group = runner.optim_wrapper.optimizer.param_groups[0]
            starts.append(runner.epoch)
            if run.startswith('flags') and not any((
                    group['maximize'], group['amsgrad'], group['foreach'],
                    group['betas'] != (0.9, 0.999), group['lr'] != 1e-3)):
                starts.append("with the config's flags")
            if not run.startswith('best'):
                raise _Started

    runner = Runner.from_cfg(cfg)
    runner.register_hook(Start())
    try:
        runner.train()
    except _Started:
        pass
    except Exception as error:  # noqa: BLE001  reported, not raised
        starts = [f'raised {type(error).__name__}: {error}']
    return (' '.join([f'trained from epoch {starts[0]}', *starts[1:]])
            if type(starts[0]) is int else starts[0]), osp.isdir(
                osp.join(victim, 'keep'))


def emit(record):
    print('RESULT ' + json.dumps(record), flush=True)


def _load_all(path, load, names, folder):
    for name in names:
        emit({'start': [path, name]})  # a crash: the last line names it
        try:
            outcome = load(name)
            outcome = outcome if isinstance(outcome, str) else 'loaded'
        except Exception as error:  # noqa: BLE001  reported, not raised
            outcome = f'refused: {type(error).__name__}: {error}'.split(
                '\n')[0]
        buffer = HistoryBuffer([1., 3.], [1, 1])
        emit({'path': path, 'file': name, 'outcome': outcome,
              'payload_ran': osp.exists(osp.join(folder, MARKER)),
              'statistics_intact': bool(buffer.statistics('mean') == 2)})


def main(folder):
    mmengine_load = CheckpointLoader.load_checkpoint.__func__
    allowed = set(map(str, torch.serialization.get_safe_globals()))
    import tlalign_mm
    from tlalign_mm.analysis.session import build_model, load_config
    added = set(map(str, torch.serialization.get_safe_globals())) - allowed
    emit({'import changes nothing': mmengine_load is CheckpointLoader
          .load_checkpoint.__func__ and not any(  # torch's own may come
              k in g for g in added for k in ('numpy', 'mmengine', 'tlal'))})
    # the files, also in the torch hub cache, open-mmlab://crafted/NAME
    # mapped to their URLs
    cache = osp.join(folder, 'torch', 'hub', 'checkpoints')
    os.makedirs(cache)
    for name, (payload, _) in files(osp.join(folder, MARKER)).items():
        for where in (folder, cache):
            (payload if callable(payload) else lambda p: torch.save(
                payload, p))(osp.join(where, f'{name}.pth'))
    names = sorted(os.listdir(cache))
    os.environ.update(TORCH_HOME=osp.join(folder, 'torch'),
                      MMENGINE_HOME=folder)
    with open(osp.join(folder, 'open_mmlab.json'), 'w') as f:
        json.dump({f'crafted/{n}': f'https://example.invalid/{n}'
                   for n in names}, f)
    cfg = load_config(DEMO)
    _load_all('build_model', lambda n: build_model(cfg, f'{folder}/{n}'),
              names, folder)
    import mmengine.runner.runner as runner

    import tlalign_mm.checkpoint.install  # noqa: F401  the opt-in line
    tlalign_mm.checkpoint.install()  # still callable
    emit({'the line installs': CheckpointLoader.load_checkpoint.__func__
          .__module__ == 'tlalign_mm.checkpoint.mmengine_adapter' and
          runner.find_latest_checkpoint.__name__ == 'find_resume_checkpoint'})
    for path, load in paths(folder).items():
        _load_all(path, load, names, folder)
    write_images(osp.join(folder, 'data'))
    write_config(osp.join(folder, 'tiny.py'), osp.join(folder, 'data'))
    cfg = Config.fromfile(osp.join(folder, 'tiny.py'))
    cfg.merge_from_dict(dict(RUN_OPTIONS, work_dir=osp.join(folder, 'first')))
    Runner.from_cfg(cfg).train()
    for run in RUNS:
        outcome, intact = _run(folder, run, osp.join(folder, 'first',
                                                     'epoch_1.pth'))
        emit({'path': 'runner', 'file': run, 'outcome': outcome,
              'victim_intact': intact})
    emit({'done': True})
    os._exit(0)  # without the seconds of interpreter teardown


if __name__ == '__main__':
    main(sys.argv[1])
