"""The configs hold the recipes their headers state, read from the resolved
dicts: the official TL-Align code for the DeiT paper recipe
(Euphoria16/TL-Align main_tla.py), Swin's recipe (microsoft/Swin-Transformer
config.py), the paper's B-model protocol, SPT_LSA_ViT's main.py, DeiT's
transfer recipe (facebookresearch/deit issue 45) and the Swin authors'
Cascade Mask R-CNN 3x schedule. Each expected value is written here from
the source the config's header names, not copied from the config; a
pattern row holds for every config it matches. What follows from a schedule
or a sampler (the lr curve, an epoch's length, the initial weights) is
computed from the built objects."""
import glob
import math
import os.path as osp

import pytest
import torch
from mmengine.optim import OptimWrapper
from mmengine.registry import PARAM_SCHEDULERS, DefaultScope
from mmpretrain.registry import MODELS

from tlalign_mm.checkpoint import CheckpointMismatchError
from tlalign_mm.testing import configs as config_snapshot


def load(rel_path: str):
    """The config ``configs/<rel_path>``, parsed once per session."""
    return config_snapshot.load(osp.join('configs', rel_path))


DEIT_PAPER = 'tlalign/deit-*_8xb128-amp-paper-tlalign_in1k.py'
SWIN_PAPER = 'tlalign/swin-*_16xb64-amp-paper-tlalign_in1k.py'
B_MODEL = 'tlalign/*-base_16xb64-ft40e-tlalign_in1k.py'
TRANSFER, CASCADE = 'transfer/*.py', 'cascade_mask_rcnn/*.py'
SL = 'sl_vit/*.py'
OPT, TRAIN = 'optim_wrapper.optimizer', 'train_dataloader'
PIPE = 'train_dataloader.dataset.pipeline'
ABSENT = 'absent'
ADAMW = dict(type='AdamW', eps=1e-8, betas=(0.9, 0.999))
# configs -> {dotted key (a list item by index or by its type): the value;
# of a dict, the items it names}
CLAIMS = {
    # main_tla.py: --drop-path 0.1; --mixup 0.0 --cutmix 1.0 --mixup-prob
    # 1.0: token CutMix every batch; --smoothing 0.1; 8 GPUs x --batch-size
    # 128, repeated augmentation, drop_last; --reprob 0.25 'pixel',
    # rand-m9-mstd0.5; --opt adamw, lr 5e-4 x 1024 / 512, no clipping,
    # NativeScaler; --model-ema off
    DEIT_PAPER: {
        'model': dict(target='tlalign', align_cfg=dict(
            follow_drop_path=False), train_cfg=dict(augments=[dict(
                type='TLTokenCutMix', alpha=1.0, box_units='tokens')])),
        'model.backbone.drop_path_rate': 0.1, 'train_cfg.max_epochs': 300,
        'model.head.loss': dict(type='LabelSmoothLoss',
                                label_smooth_val=0.1, mode='original'),
        TRAIN: dict(batch_size=128, drop_last=True, sampler=dict(
            type='RepeatAugSampler', num_repeats=3, shuffle=True)),
        'auto_scale_lr.base_batch_size': 1024,
        f'{PIPE}.RandomErasing': dict(erase_prob=0.25, mode='rand'),
        f'{PIPE}.RandAugment': dict(magnitude_level=9, magnitude_std=0.5),
        OPT: dict(ADAMW, lr=1e-3, weight_decay=0.05),
        'optim_wrapper': dict(type='AmpOptimWrapper', clip_grad=None),
        'custom_hooks.EMAHook': ABSENT,
        'randomness': dict(seed=0, diff_rank_seed=True)},
    # Swin's configs/swin/*.yaml and config.py, AMP, 16 x 64
    'tlalign/swin-tiny_16xb64-amp-paper-*_in1k.py': {
        'model.backbone.drop_path_rate': 0.2},
    'tlalign/swin-small_16xb64-amp-paper-*_in1k.py': {
        'model.backbone.drop_path_rate': 0.3},
    SWIN_PAPER: {
        'model': dict(align_cfg=dict(follow_drop_path=False), train_cfg=dict(
            augments=[dict(type='Mixup', alpha=0.8),
                      dict(type='CutMix', alpha=1.0)])),
        OPT: dict(ADAMW, lr=5e-4 * 1024 / 512, weight_decay=0.05),
        'optim_wrapper': dict(type='AmpOptimWrapper',
                              clip_grad=dict(max_norm=5.0)),
        TRAIN: dict(batch_size=64, drop_last=True),
        'train_cfg.max_epochs': 300},
    # the B protocol: 40 epochs from the official checkpoint, constant lr
    # 1e-5 at 1024 images (after the lr x batch / 512 scaling), wd 1e-8
    'tlalign/deit-base_16xb64-ft40e-tlalign_in1k.py': {
        'load_from': 'checkpoints/deit-base_3rdparty_pt-16xb64_in1k_'
                     '20211124-6f40c188.pth',
        # the official code's --finetune
        'model.train_cfg.augments.0.type': 'TLTokenCutMix'},
    'tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py': {
        'load_from': 'checkpoints/swin_base_patch4_window7_224-4670dd19.pth'},
    B_MODEL: {
        OPT: dict(lr=1e-5, weight_decay=1e-8), 'train_cfg.max_epochs': 40,
        'param_scheduler.0.type': 'ConstantLR', 'param_scheduler.1': ABSENT,
        'model.align_cfg.follow_drop_path': False,
        TRAIN: dict(batch_size=64, drop_last=True),
        'auto_scale_lr.base_batch_size': 1024},
    # DeiT's transfer recipe: SGD 0.01 nesterov, 8 x 96 (main.py:241), no
    # erasing
    TRANSFER: {
        OPT: dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4,
                  nesterov=True),
        'optim_wrapper.type': 'AmpOptimWrapper',
        TRAIN: dict(batch_size=96, drop_last=True),
        f'{TRAIN}.sampler': dict(type='RepeatAugSampler', num_repeats=3),
        'model.backbone.drop_path_rate': 0.0, f'{PIPE}.RandomErasing': ABSENT},
    # mmpretrain's DeiT-S recipe, its CutMix 1.0 swapped for ResizeMix at
    # mmpretrain's defaults (resizemix.py:55-61)
    'tlalign/deit-small_4xb256-resizemix*_in1k.py': {
        'model.train_cfg': dict(augments=[dict(type='Mixup', alpha=0.8), dict(
            type='ResizeMix', alpha=1.0, lam_min=0.1, lam_max=0.8)])},
    # Cascade Mask R-CNN 3x: AdamW 1e-4, 500 warm-up iterations, 36
    # epochs, steps at 27 and 33
    CASCADE: {
        'param_scheduler': [
            dict(type='LinearLR', start_factor=0.001, by_epoch=False,
                 begin=0, end=500),
            dict(type='MultiStepLR', begin=0, end=36, by_epoch=True,
                 milestones=[27, 33], gamma=0.1)],
        OPT: dict(type='AdamW', lr=1e-4), 'train_cfg.max_epochs': 36,
        'optim_wrapper.type': 'AmpOptimWrapper'},
    # SPT_LSA_ViT main.py: 100 epochs (10 of warm-up) of batch 128, AdamW
    # 1e-3 wd 5e-2, label smoothing 0.1, --mix_prob 0.5 of CutMix (--beta
    # 1.0) or Mixup (--alpha 1.0) half each, --re 0.25 (--re_sh 0.4,
    # --re_r1 0.3); the crop's padding 4, of zeros (main.py:169-214)
    SL: {
        'train_cfg.max_epochs': 100, 'param_scheduler.0.end': 10,
        TRAIN: dict(batch_size=128, drop_last=True, sampler=dict(
            type='MultiPassSampler', num_passes=3, shuffle=True)),
        OPT: dict(type='AdamW', lr=1e-3, weight_decay=0.05),
        'model.head.loss.label_smooth_val': 0.1,
        'model.train_cfg': dict(augments=[
            dict(type='Mixup', alpha=1.0), dict(type='CutMix', alpha=1.0)],
            probs=[0.25, 0.25]),
        f'{PIPE}.ZhongRandomErasing': dict(
            erase_prob=0.25, min_area_ratio=0.02, max_area_ratio=0.4,
            min_aspect=0.3),
        f'{PIPE}.RandomCrop': dict(padding=4, pad_val=ABSENT)},
    'sl_vit/*_cifar*.py': {f'{TRAIN}.dataset.download': False},
    # create_model.py: patch size by dataset; Swin's absolute position
    # embedding (swin.py:500)
    'sl_vit/*vit_*_cifar*.py': {'model.backbone.patch_size': 4},
    'sl_vit/*vit_*_tiny-imagenet.py': {'model.backbone.patch_size': 8},
    'sl_vit/*swin_*_cifar*.py': {'model.backbone.patch_size': 2},
    'sl_vit/*swin_*_tiny-imagenet.py': {'model.backbone.patch_size': 4},
    'sl_vit/*swin_*.py': {'model.backbone.use_abs_pos_embed': True},
}

def lookup(cfg, key):
    """``cfg`` at the dotted ``key``: a list item by index, or the one
    whose ``type`` is the name; :data:`ABSENT` where there is none."""
    for part in key.split('.'):
        if isinstance(cfg, list):
            items = [x for i, x in enumerate(cfg) if str(i) == part
                     or isinstance(x, dict) and x.get('type') == part]
            cfg = items[0] if len(items) == 1 else ABSENT
        else:
            cfg = cfg.get(part, ABSENT) if isinstance(cfg, dict) else ABSENT
    return cfg


def paths(pattern):
    found = sorted(glob.glob(osp.join(config_snapshot.ROOT, 'configs',
                                      pattern)))
    assert found, pattern
    return found


@pytest.mark.parametrize('pattern', CLAIMS)
def test_a_config_holds_the_recipe_its_header_states(pattern):
    for path in paths(pattern):
        cfg = config_snapshot.load(path).to_dict()
        for key, want in CLAIMS[pattern].items():
            got = lookup(cfg, key)
            if isinstance(want, dict) and isinstance(got, dict):
                got = {k: got.get(k, ABSENT) for k in want}
            # type and value: 1 is not True, a list not a tuple
            assert (type(got), got) == (type(want), want), (
                osp.basename(path), key)

def scheduled_lrs(cfg, steps, epoch_length=1):
    """The lr at each step under the config's schedulers, built as the
    Runner builds them."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                lr=cfg.optim_wrapper.optimizer.lr)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        schedulers = [PARAM_SCHEDULERS.build(dict(s), default_args=dict(
            optimizer=OptimWrapper(optimizer), epoch_length=epoch_length))
            for s in cfg.param_scheduler]
    lrs = []
    for _ in range(steps):
        lrs.append(optimizer.param_groups[0]['lr'])
        for s in schedulers:
            s.step()
    return lrs


@pytest.mark.parametrize('pattern, lr, warmup, total, epoch_length, rel', [
    # DeiT (and its transfer recipe): chained LinearLR + CosineAnnealingLR
    # stepped per epoch, timm's per-epoch cosine to 5e-4 relative (the
    # headers' bound; mmengine's warm-up slope is 1 / (W + 1), timm's 1 / W)
    (DEIT_PAPER, 1e-3, 5, 300, 1, 5e-4),
    (TRANSFER, 0.01, 5, 1000, 1, 5e-4),
    # Swin main.py:205 steps every iteration (here 10 an epoch); float64
    # recurrences over <= 3000 steps: far below 1e-9
    (SWIN_PAPER, 1e-3, 200, 3000, 10, 1e-9)])
def test_a_schedule_is_the_originals(pattern, lr, warmup, total,
                                     epoch_length, rel):
    """timm's CosineLRScheduler: linear warm-up from 1e-6, then 1e-5 + (lr
    - 1e-5) (1 + cos(pi t' / T)) / 2, with t' = t, T = total (DeiT), or t'
    = t - W, T = total - W (Swin lr_scheduler.py:24-34, warmup_prefix).
    One named difference for Swin: mmengine's LinearLR reaches the peak at
    the warm-up's last iteration (slope 1 / (W - 1))."""
    swin = pattern == SWIN_PAPER
    for path in paths(pattern)[:None if swin else 1]:  # DeiT twins and
        got = scheduled_lrs(config_snapshot.load(path), total,  # sizes
                            epoch_length)  # share one schedule
        for t in range(total):
            shift = warmup if swin else 0
            want = 1e-5 + 0.5 * (lr - 1e-5) * (1 + math.cos(
                math.pi * (t - shift) / (total - shift)))
            if t < warmup:
                want = 1e-6 + t * (lr - 1e-6) / (warmup - swin)
            assert got[t] == pytest.approx(want, rel=rel), t


@pytest.mark.parametrize('pattern, images, world, iterations', [
    # main_tla.py:222-228 drop_last; RASampler's floor(N // 256 * 256 / 8)
    # per rank and mmpretrain's ceil(N / 8) both give 1251 of 128
    ('tlalign/deit-small_8xb128-amp-paper-tlalign_in1k.py', 1281167, 8,
     1251),
    # SPT_LSA_ViT main.py:221-223: RASampler(N, 128, 1, 3, drop_last)
    ('sl_vit/sl-swin_1xb128-cutmix_cifar10.py', 50000, 1, 1171),
    ('sl_vit/vit_1xb128-tlalign_tiny-imagenet.py', 100000, 1, 2343),
])
def test_an_epoch_is_the_originals(pattern, images, world, iterations,
                                   monkeypatch):
    from mmengine.runner import Runner
    for module in ('mmpretrain.datasets.samplers.repeat_aug',
                   'tlalign_mm.datasets.multi_pass_sampler'):
        monkeypatch.setattr(f'{module}.get_dist_info', lambda: (0, world))
    cfg = dict(load(pattern).train_dataloader.to_dict(), num_workers=0,
               persistent_workers=False)
    cfg['dataset'] = range(images)  # a dataset object is taken as it is
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        assert len(Runner.build_dataloader(cfg, seed=0)) == iterations


def is_normal(w, sigma):
    """Mean 0, std sigma and a normal's tail, P(|x| > 2 sigma) = 0.0455 (a
    uniform of that std has none beyond 1.73 sigma), each to 5 standard
    errors of n draws."""
    w = w.detach().flatten().double()
    n = w.numel()
    tail = (w.abs() > 2 * sigma).double().mean().item()
    return (abs(w.mean().item()) < 5 * sigma / math.sqrt(n)
            and abs(w.std().item() - sigma) < 5 * sigma / math.sqrt(2 * n)
            and abs(tail - 0.0455) < 5 * math.sqrt(0.0455 * 0.9545 / n))


@pytest.mark.parametrize('path, names', [
    ('tlalign/deit-tiny_8xb128-amp-paper-tlalign_in1k.py',
     ('head.layers.head.weight', 'backbone.cls_token')),
    ('transfer/deit-tiny_tlalign-in1k-pre_8xb96-1000e_cifar10.py',
     ('head.layers.head.weight', ))])
def test_the_head_starts_truncated_normal(path, names):
    """timm's VisionTransformer.init_weights('') (vision_transformer.py:
    328-339, 424-456) in the official code and DeiT's fine-tunes: the head
    and the class token truncated normal 0.02 (mmpretrain: zero); the
    configs' init_cfg on a narrow model, without the checkpoint."""
    cfg = load(path).model
    if 'Pretrained' in str(cfg.backbone.get('init_cfg')):
        cfg.backbone.pop('init_cfg')
    cfg.backbone.arch = dict(embed_dims=64, num_layers=1, num_heads=2,
                             feedforward_channels=64)
    cfg.head.in_channels = 64
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    model.init_weights()
    params = dict(model.named_parameters())
    for name in names:  # the cut at +-2 (100 sigma): a normal
        assert is_normal(params[name], 0.02), name
    assert not model.head.layers.head.bias.any()


@pytest.mark.parametrize('kind', ['tlalign', 'cutmix'])
def test_a_missing_b_checkpoint_says_how_to_make_it(kind):
    """The B models' downstream configs start from the -ft40e fine-tune,
    their CutMix twins from the official checkpoint; a missing file names
    the variable that points elsewhere and the command that makes it."""
    from mmengine.registry import WEIGHT_INITIALIZERS
    for path in paths(f'*/*-base*_{kind}-in1k-pre_*.py'):
        arch = 'swin' if '_swin-base' in path else 'deit'
        init = dict(config_snapshot.load(path).model.backbone.init_cfg,
                    checkpoint='checkpoints/does-not-exist.pth')
        with pytest.raises(CheckpointMismatchError) as error:
            WEIGHT_INITIALIZERS.build(init)(torch.nn.Linear(1, 1))
        words = ('TLALIGN_CKPT', 'tools/dist_train.sh configs/tlalign/'
                 f'{arch}-base_16xb64-ft40e-tlalign_in1k.py') \
            if kind == 'tlalign' else (f'{arch.upper()}_B_CKPT', 'wget -P')
        assert 'does-not-exist.pth' in str(error.value), path
        assert all(w in str(error.value) for w in words), path
