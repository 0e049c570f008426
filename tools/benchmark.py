"""Training-step time and memory of TL-Align against plain CutMix.

Three settings share one model's weights and one batch and are timed in
interleaved repetitions in one process, so machine noise hits all alike:

- ``cutmix``: mmpretrain's ``ImageClassifier`` with ``CutMix`` (the baseline);
- ``tlalign``: ``TLAlignClassifier`` with ``TLCutMix`` (fused attention, labels
  as source weights);
- ``dense``: the original code's approach, for reference: explicit attention
  matrices and labels carried as ``(B, N, C)`` class vectors.

Printed: median step time and the ratio to ``cutmix``; memory as the peak
allocated on CUDA, or on CPU as the bytes autograd saves for backward (the
part of the peak that TL-Align could change).

    .venv/bin/python tools/benchmark.py --model deit-small
    .venv/bin/python tools/benchmark.py --model deit-small --device cuda \
        --batch-size 128 --bf16
"""
import argparse
import contextlib
import copy
import statistics
import time
from contextlib import contextmanager

import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import tlalign_mm  # noqa: F401

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
    'pvt-small': dict(
        backbone=dict(type='mmdet.PyramidVisionTransformer',
                      num_layers=[3, 4, 6, 3], qkv_bias=True,
                      drop_path_rate=0.1, out_indices=(3, )),
        neck=dict(type='PyramidGlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=512)),
}


def build(model_name, mode, num_classes):
    if model_name.startswith('pvt'):
        import mmdet.models  # noqa: F401  (registers PVT; needs mmcv's ops)
    spec = copy.deepcopy(MODELS_ZOO[model_name])
    head = dict(spec.pop('head'), num_classes=num_classes,
                loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                          mode='original'))
    aug = 'CutMix' if mode == 'cutmix' else 'TLCutMix'
    cfg = dict(
        type='ImageClassifier' if mode == 'cutmix' else 'TLAlignClassifier',
        head=head,
        data_preprocessor=dict(
            num_classes=num_classes, mean=[123.675, 116.28, 103.53],
            std=[58.395, 57.12, 57.375], to_rgb=True,
            batch_augments=dict(augments=[dict(type=aug, alpha=1.0)])),
        **spec)
    return MODELS.build(cfg)


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


def step(model, optim, data, mode, device, bf16, num_classes):
    batch = model.data_preprocessor(copy.copy(data), training=True)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model', default='deit-small', choices=MODELS_ZOO)
    parser.add_argument('--modes', default='cutmix,tlalign,dense')
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument('--num-classes', type=int, default=1000)
    parser.add_argument('--reps', type=int, default=6)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--bf16', action='store_true')
    parser.add_argument('--profile', action='store_true',
                        help='also print each setting\'s top operators '
                        '(torch.profiler, two steps)')
    args = parser.parse_args()
    device = torch.device(args.device)
    modes = args.modes.split(',')
    if 'dense' in modes and not args.model.startswith('deit'):
        modes.remove('dense')

    torch.manual_seed(0)
    base = build(args.model, 'cutmix', args.num_classes).to(device)
    models, optims = {}, {}
    for mode in modes:
        m = build(args.model, 'cutmix' if mode == 'dense' else mode,
                  args.num_classes).to(device)
        m.load_state_dict(base.state_dict())  # one set of weights for all
        m.train()
        models[mode] = m
        optims[mode] = torch.optim.AdamW(m.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    data = dict(
        inputs=[torch.randint(0, 256, (3, args.img_size, args.img_size),
                              dtype=torch.uint8, generator=g)
                for _ in range(args.batch_size)],
        data_samples=[DataSample().set_gt_label(int(i)) for i in
                      torch.randint(0, args.num_classes, (args.batch_size,),
                                    generator=g)])
    if device.type == 'cuda':
        data['inputs'] = [x.to(device) for x in data['inputs']]

    times = {m: [] for m in modes}
    mems = {m: 0 for m in modes}
    for rep in range(args.reps + 1):
        for mode in modes:
            t, mem = step(models[mode], optims[mode], data, mode, device,
                          args.bf16, args.num_classes)
            if rep > 0:  # the first round warms up
                times[mode].append(t)
                mems[mode] = max(mems[mode], mem)
    ref_t = statistics.median(times[modes[0]])
    ref_m = mems[modes[0]]
    mem_name = ('peak MiB' if device.type == 'cuda' else
                'saved-for-backward MiB')
    print(f'model={args.model} device={device} batch={args.batch_size} '
          f'img={args.img_size} classes={args.num_classes} bf16={args.bf16} '
          f'reps={args.reps} threads={torch.get_num_threads()}')
    print(f'{"setting":10s} {"step s":>8s} {"x cutmix":>9s} '
          f'{mem_name:>24s} {"x cutmix":>9s}')
    for mode in modes:
        t = statistics.median(times[mode])
        print(f'{mode:10s} {t:8.3f} {t / ref_t:9.3f} '
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
