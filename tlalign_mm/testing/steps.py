"""The training steps ``tools/benchmark.py`` and ``tools/gpu_report.py``
time: one classifier per setting built from a named model
(:data:`MODELS_ZOO`), one batch for all, and one step (data preprocessor
untimed, then forward with the loss, backward, AdamW).

- ``cutmix``: mmpretrain's ``ImageClassifier`` with ``CutMix`` (the
  baseline);
- ``tlalign``: ``TLAlignClassifier`` with ``TLCutMix``;
- ``dense``: the original code's approach, for reference: explicit
  attention matrices and labels carried as ``(B, N, C)`` class vectors.

A ``+compile`` suffix is applied by :func:`compiled`. Memory: the peak
allocated on CUDA, or on CPU the bytes autograd saves for backward (the
part of the peak that TL-Align could change).
"""
import contextlib
import copy
import time
from typing import Union

import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import tlalign_mm  # noqa: F401  (registers modules)

from .cost import step_cost

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


def build(model: Union[str, dict], mode: str, num_classes: int,
          align_cfg: dict = None):
    """The classifier of ``mode`` (``cutmix``, ``tlalign``, ``dense``; a
    ``+compile`` suffix is :func:`compiled`'s) for ``model``, a name in
    :data:`MODELS_ZOO` or such a dict; ``align_cfg``: the TL-Align
    classifier's (e.g. ``dict(impl='sdpa')``, the ĀY path)."""
    mode = mode.split('+')[0]
    spec = copy.deepcopy(MODELS_ZOO[model] if isinstance(model, str)
                         else model)
    if 'PyramidVisionTransformer' in spec['backbone']['type']:
        import mmdet.models  # noqa: F401  (registers PVT; needs mmcv's ops)
    head = dict(spec.pop('head'), num_classes=num_classes,
                loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                          mode='original'))
    aug = 'TLCutMix' if mode == 'tlalign' else 'CutMix'
    if mode == 'tlalign' and align_cfg:
        spec['align_cfg'] = align_cfg
    cfg = dict(
        type='TLAlignClassifier' if mode == 'tlalign' else 'ImageClassifier',
        head=head,
        data_preprocessor=dict(
            num_classes=num_classes, mean=[123.675, 116.28, 103.53],
            std=[58.395, 57.12, 57.375], to_rgb=True,
            batch_augments=dict(augments=[dict(type=aug, alpha=1.0)])),
        **spec)
    return MODELS.build(cfg)


def make_data(batch_size: int, img_size: int, num_classes: int,
              device='cpu') -> dict:
    """A seeded batch as the dataloader gives it: uint8 images and labels."""
    g = torch.Generator().manual_seed(0)
    return dict(
        inputs=[torch.randint(0, 256, (3, img_size, img_size),
                              dtype=torch.uint8, generator=g).to(device)
                for _ in range(batch_size)],
        data_samples=[DataSample().set_gt_label(int(i)) for i in
                      torch.randint(0, num_classes, (batch_size, ),
                                    generator=g)])


def compiled(model, mode: str = 'default', backend: str = 'inductor'):
    """``model``'s forward (with the loss) under ``torch.compile`` (``mode``
    for inductor), with its drop-path rates as Python floats: mmpretrain's
    are numpy scalars, on which dynamo breaks the graph in every drop-path
    (upstream; CutMix alike)."""
    for module in model.modules():
        if hasattr(module, 'drop_prob'):
            module.drop_prob = float(module.drop_prob)
    kwargs = dict(backend=backend)
    if mode != 'default' and backend == 'inductor':
        kwargs['mode'] = mode
    model.forward = torch.compile(model.forward, **kwargs)
    return model


@contextlib.contextmanager
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
    """One training step; returns (seconds, memory bytes)."""
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


def extra_ops_per_block(model, data, num_classes):
    """Operations a TL-Align step dispatches beyond a CutMix step, per
    block (forward and backward; deterministic)."""
    totals = {}
    for mode in ('cutmix', 'tlalign'):
        torch.manual_seed(0)
        classifier = build(model, mode, num_classes)
        classifier.train()
        torch.manual_seed(1)
        batch = classifier.data_preprocessor(fresh(data), training=True)
        ops, _ = step_cost(classifier, batch)
        totals[mode] = ops.total
        if mode == 'tlalign':
            blocks = len(classifier.recording.description.blocks)
    return (totals['tlalign'] - totals['cutmix']) / blocks
