"""Training-step time and memory of TL-Align against plain CutMix.

Settings share one model's weights and one batch and are timed in
interleaved repetitions in one process, so machine noise hits all alike:

- ``cutmix``: mmpretrain's ``ImageClassifier`` with ``CutMix`` (the baseline);
- ``tlalign``: ``TLAlignClassifier`` with ``TLCutMix``;
- ``dense``: the original code's approach, for reference: explicit attention
  matrices and labels carried as ``(B, N, C)`` class vectors;
- with ``--baseline DIR``, also ``tlalign@baseline``: the
  ``TLAlignClassifier`` of another checkout's ``tlalign_mm`` (e.g. main),
  imported beside this one, so two versions are timed interleaved in one
  process;
- with ``--compile``, also ``cutmix+compile`` and ``tlalign+compile`` (and
  ``tlalign@baseline+compile``): the
  model's forward and loss under ``torch.compile`` (backward and optimizer
  step eager). mmpretrain's drop-path rates are numpy scalars, on which
  dynamo breaks the graph in every drop-path (upstream; CutMix alike):
  ``--compile`` makes them Python floats in every setting.

Printed: the operations a TL-Align step dispatches beyond a CutMix step,
per block (deterministic; ``--ops-only`` prints it alone, untimed); median
step time and the ratio to ``cutmix``; memory as the peak
allocated on CUDA, or on CPU as the bytes autograd saves for backward (the
part of the peak that TL-Align could change).

    .venv/bin/python tools/benchmark.py --model deit-small
    .venv/bin/python tools/benchmark.py --model swin-tiny --ops-only
    .venv/bin/python tools/benchmark.py --model deit-small --compile
    .venv/bin/python tools/benchmark.py --model demo-vit --threads 1
    .venv/bin/python tools/benchmark.py --model deit-small --device cuda \
        --batch-size 128 --bf16 --compile
    .venv/bin/python tools/benchmark.py --model deit-small --baseline \
        /work/main
"""
import argparse
import contextlib
import copy
import importlib
import os.path as osp
import statistics
import sys
import time
from contextlib import contextmanager

import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
import tlalign_mm  # noqa: E402,F401
from tools.cost import step_cost  # noqa: E402

# The main job's tiny ViT (configs/demo): 16 px digits, patch 4 (16 tokens),
# 64 dims, 4 blocks of 4 heads, 10 classes.
DEMO_ARCH = dict(embed_dims=64, num_layers=4, num_heads=4,
                 feedforward_channels=128)
DEMO = dict(img_size=16, num_classes=10, batch_size=64)

MODELS_ZOO = {
    'deit-small': dict(
        backbone=dict(type='VisionTransformer', arch='deit-small',
                      img_size=224, patch_size=16, drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=384)),
    'deit-tiny': dict(
        backbone=dict(type='VisionTransformer', arch='deit-tiny',
                      img_size=224, patch_size=16, drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=192)),
    'deit-base': dict(
        backbone=dict(type='VisionTransformer', arch='deit-base',
                      img_size=224, patch_size=16, drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=768)),
    # timm's deit_small_patch16_224 through mmpretrain's TIMMBackbone
    # (PooledTIMMBackbone: the class token, as timm's head reads it).
    'timm-deit-small': dict(
        backbone=dict(type='PooledTIMMBackbone',
                      model_name='deit_small_patch16_224',
                      global_pool='token', drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=384)),
    'swin-tiny': dict(
        backbone=dict(type='SwinTransformer', arch='tiny', img_size=224,
                      drop_path_rate=0.2),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=768)),
    'demo-vit': dict(
        backbone=dict(type='VisionTransformer', arch=DEMO_ARCH, img_size=16,
                      patch_size=4, drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=64)),
    'demo-sl-vit': dict(
        backbone=dict(type='SLViT', arch=DEMO_ARCH, img_size=16,
                      patch_size=4, drop_path_rate=0.1, use_spt=True,
                      use_lsa=True),
        head=dict(type='VisionTransformerClsHead', in_channels=64)),
    'pvt-small': dict(
        backbone=dict(type='mmdet.PyramidVisionTransformer',
                      num_layers=[3, 4, 6, 3], qkv_bias=True,
                      drop_path_rate=0.1, out_indices=(3, )),
        neck=dict(type='PyramidGlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=512)),
}


def import_baseline(root):
    """The ``tlalign_mm`` package of the checkout at ``root``, imported
    beside ours (its modules renamed ``baseline.tlalign_mm...``), and what
    it registered: the registries keep ours, except in
    :func:`baseline_registered`."""
    from mmengine.fileio.backends import registry_utils
    from mmengine.registry import Registry

    def ours():
        return [k for k in sys.modules if k.split('.')[0] == 'tlalign_mm']

    own = {k: sys.modules.pop(k) for k in ours()}
    register, entries = Registry._register_module, []

    def record(self, module, module_name=None, force=False):
        names = module_name or module.__name__
        for name in [names] if isinstance(names, str) else names:
            entries.append((self, name, module))

    # its file backends and scope registries are not installed: ours stay
    backend, child = registry_utils._register_backend, Registry._add_child
    Registry._register_module = record
    Registry._add_child = registry_utils._register_backend = \
        lambda *args, **kwargs: None
    sys.path.insert(0, root)
    try:
        package = importlib.import_module('tlalign_mm')
    finally:
        sys.path.remove(root)
        Registry._register_module, Registry._add_child = register, child
        registry_utils._register_backend = backend
        for k in ours():
            sys.modules['baseline.' + k] = sys.modules.pop(k)
        sys.modules.update(own)
    return package, entries


@contextmanager
def baseline_registered(entries):
    """The baseline's registrations in place of ours (while it builds)."""
    saved = [(reg, name, reg._module_dict.get(name)) for reg, name, _ in
             entries]
    for reg, name, module in entries:
        reg._module_dict[name] = module
    try:
        yield
    finally:
        for reg, name, module in saved:
            reg._module_dict[name] = module


BASELINE = {}  # import_baseline's result, once --baseline is given


def build(model_name, mode, num_classes):
    """The classifier of ``mode`` (``cutmix``, ``tlalign``, ``dense``,
    ``tlalign@baseline``; any ``+compile`` suffix is applied by
    :func:`compiled`)."""
    mode = mode.split('+')[0]
    if mode == 'tlalign@baseline':
        with baseline_registered(BASELINE['entries']):
            return build(model_name, 'tlalign', num_classes)
    if model_name.startswith('pvt'):
        import mmdet.models  # noqa: F401  (registers PVT; needs mmcv's ops)
    spec = copy.deepcopy(MODELS_ZOO[model_name])
    head = dict(spec.pop('head'), num_classes=num_classes,
                loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                          mode='original'))
    aug = 'TLCutMix' if mode == 'tlalign' else 'CutMix'
    cfg = dict(
        type='TLAlignClassifier' if mode == 'tlalign' else 'ImageClassifier',
        head=head,
        data_preprocessor=dict(
            num_classes=num_classes, mean=[123.675, 116.28, 103.53],
            std=[58.395, 57.12, 57.375], to_rgb=True,
            batch_augments=dict(augments=[dict(type=aug, alpha=1.0)])),
        **spec)
    return MODELS.build(cfg)


def compiled(model):
    """``model``'s forward (with the loss) under ``torch.compile``, with its
    drop-path rates as Python floats (see the module docstring)."""
    for module in model.modules():
        if hasattr(module, 'drop_prob'):
            module.drop_prob = float(module.drop_prob)
    model.forward = torch.compile(model.forward)
    return model


@contextmanager
def dense_attention(model):
    """Swap every ViT attention for explicit matrices that also carry
    ``(B, N, C)`` labels, as the original TL-Align code does."""
    from mmpretrain.models.utils import MultiheadAttention
    state = {}
    mods = [m for m in model.modules() if isinstance(m, MultiheadAttention)]
    if not mods:
        raise SystemExit('--mode dense is implemented for ViT/DeiT only.')

    def dense(q, k, v, attn_mask=None, dropout_p=0., **kw):
        A = torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1]**-0.5, -1)
        with torch.no_grad():
            Y = state['labels']
            state['labels'] = (Y + A.mean(1).float() @ Y) / 2
        return torch.dropout(A, dropout_p, True) @ v

    for m in mods:
        m.scaled_dot_product_attention = dense
    try:
        yield state
    finally:
        for m in mods:
            del m.scaled_dot_product_attention


def saved_bytes():
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    return total, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


def fresh(data):
    """The batch as the dataloader gives it: the data preprocessor writes
    scores into the data samples, so each step gets its own."""
    return dict(inputs=data['inputs'],
                data_samples=[s.clone() for s in data['data_samples']])


def step(model, optim, data, mode, device, bf16, num_classes):
    batch = model.data_preprocessor(fresh(data), training=True)
    mode = mode.split('+')[0]
    ctx = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    total, hooks = saved_bytes()
    if device.type == 'cuda':
        hooks = contextlib.nullcontext()  # CUDA reports its own peak
        torch.cuda.synchronize()  # the mixing queued above is not timed
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    with ctx, hooks:
        if mode == 'dense':
            inputs, samples = batch['inputs'], batch['data_samples']
            B, N = inputs.shape[0], 1 + (inputs.shape[-1] // 16)**2
            with dense_attention(model) as state:
                state['labels'] = torch.full((B, N, num_classes),
                                             1. / num_classes, device=device)
                losses = model(inputs, samples, mode='loss')
        else:
            losses = model(**batch, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    if device.type == 'cuda':
        torch.cuda.synchronize()
        mem = torch.cuda.max_memory_allocated()
    else:
        mem = total[0]
    return time.perf_counter() - start, mem


def extra_ops_per_block(model_name, data, num_classes):
    """Operations a TL-Align step dispatches beyond a CutMix step, per
    block (forward and backward; deterministic)."""
    totals = {}
    for mode in ('cutmix', 'tlalign'):
        torch.manual_seed(0)
        model = build(model_name, mode, num_classes)
        model.train()
        torch.manual_seed(1)
        batch = model.data_preprocessor(fresh(data), training=True)
        ops, _ = step_cost(model, batch)
        totals[mode] = ops.total
        if mode == 'tlalign':
            blocks = len(model.recording.description.blocks)
    return (totals['tlalign'] - totals['cutmix']) / blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model', default='deit-small', choices=MODELS_ZOO)
    parser.add_argument('--modes', default=None,
                        help='comma-separated settings (default: cutmix, '
                        'tlalign, dense for DeiT; with --compile also the '
                        'compiled cutmix and tlalign)')
    parser.add_argument('--compile', action='store_true',
                        help='also time the settings under torch.compile')
    parser.add_argument('--baseline', default=None, metavar='DIR',
                        help='also time tlalign@baseline: the TL-Align '
                        'classifier of the tlalign_mm checkout in DIR')
    parser.add_argument('--batch-size', type=int, default=None,
                        help='default: 64 for demo-*, 16 otherwise')
    parser.add_argument('--img-size', type=int, default=None,
                        help='default: 16 for demo-*, 224 otherwise')
    parser.add_argument('--num-classes', type=int, default=None,
                        help='default: 10 for demo-*, 1000 otherwise')
    parser.add_argument('--reps', type=int, default=None,
                        help='timed rounds (default: 50 for demo-*, 6)')
    parser.add_argument('--threads', type=int, default=None,
                        help='torch intra-op threads (default: torch\'s)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--bf16', action='store_true')
    parser.add_argument('--profile', action='store_true',
                        help='also print each setting\'s top operators '
                        '(torch.profiler, two steps)')
    parser.add_argument('--ops-only', action='store_true',
                        help='print the operations per block a TL-Align '
                        'step adds (deterministic) and stop: no timing')
    args = parser.parse_args()
    demo = args.model.startswith('demo')
    for key, default in (('batch_size', DEMO['batch_size'] if demo else 16),
                         ('img_size', DEMO['img_size'] if demo else 224),
                         ('num_classes', DEMO['num_classes'] if demo else
                          1000), ('reps', 50 if demo else 6)):
        if getattr(args, key) is None:
            setattr(args, key, default)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.modes:
        modes = args.modes.split(',')
    else:
        modes = ['cutmix', 'tlalign'] + (
            ['dense'] if args.model.startswith('deit') else [])
        if args.baseline:
            modes.insert(2, 'tlalign@baseline')
        if args.compile:
            modes += ['cutmix+compile', 'tlalign+compile'] + (
                ['tlalign@baseline+compile'] if args.baseline else [])
    if args.baseline:
        BASELINE['package'], BASELINE['entries'] = import_baseline(
            osp.abspath(args.baseline))

    g = torch.Generator().manual_seed(0)
    data = dict(
        inputs=[torch.randint(0, 256, (3, args.img_size, args.img_size),
                              dtype=torch.uint8, generator=g)
                for _ in range(args.batch_size)],
        data_samples=[DataSample().set_gt_label(int(i)) for i in
                      torch.randint(0, args.num_classes, (args.batch_size,),
                                    generator=g)])
    per_block = extra_ops_per_block(args.model, dict(
        inputs=data['inputs'][:2], data_samples=data['data_samples'][:2]),
        args.num_classes)
    if args.ops_only:
        print(f'{args.model}: {per_block:.2f} operations per block, TL-Align '
              'beyond CutMix (forward + backward)')
        return
    if device.type == 'cuda':
        data['inputs'] = [x.to(device) for x in data['inputs']]

    torch.manual_seed(0)
    base = build(args.model, 'cutmix', args.num_classes).to(device)
    models, optims = {}, {}
    for mode in modes:
        m = build(args.model, mode, args.num_classes).to(device)
        m.load_state_dict(base.state_dict())  # one set of weights for all
        m.train()
        if mode.endswith('+compile'):
            compiled(m)
        models[mode] = m
        optims[mode] = torch.optim.AdamW(m.parameters(), lr=1e-4)

    times = {m: [] for m in modes}
    mems = {m: 0 for m in modes}
    warmup = 3 if args.compile else 1  # compiling takes the first calls
    for rep in range(args.reps + warmup):
        for mode in modes:
            t, mem = step(models[mode], optims[mode], data, mode, device,
                          args.bf16, args.num_classes)
            if rep >= warmup:
                times[mode].append(t)
                mems[mode] = max(mems[mode], mem)
    mem_name = ('peak MiB' if device.type == 'cuda' else
                'saved-for-backward MiB')
    print(f'model={args.model} device={device} batch={args.batch_size} '
          f'img={args.img_size} classes={args.num_classes} bf16={args.bf16} '
          f'reps={args.reps} threads={torch.get_num_threads()}')
    print(f'operations per block, TL-Align beyond CutMix (forward + '
          f'backward): {per_block:.2f}')
    print(f'{"setting":16s} {"step s":>8s} {"x cutmix":>9s} '
          f'{"x own cutmix":>12s} {mem_name:>24s} {"x cutmix":>9s}')
    ref_t, ref_m = statistics.median(times[modes[0]]), mems[modes[0]]
    for mode in modes:
        t = statistics.median(times[mode])
        own = mode.replace('@baseline', '').replace('tlalign', 'cutmix')
        own = own.replace('dense', 'cutmix')
        own_t = statistics.median(times[own]) if own in times else ref_t
        print(f'{mode:16s} {t:8.4f} {t / ref_t:9.3f} {t / own_t:12.3f} '
              f'{mems[mode] / 2**20:24.1f} {mems[mode] / ref_m:9.3f}')
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if device.type == 'cuda' else [])
        sort = 'self_cuda_time_total' if device.type == 'cuda' \
            else 'self_cpu_time_total'
        for mode in modes:
            with profile(activities=activities) as prof:
                for _ in range(2):
                    step(models[mode], optims[mode], data, mode, device,
                         args.bf16, args.num_classes)
            print(f'\n== {mode}: top operators over two steps ==')
            print(prof.key_averages().table(sort_by=sort, row_limit=18,
                                            max_name_column_width=48))


if __name__ == '__main__':
    main()
