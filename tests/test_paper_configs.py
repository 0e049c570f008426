"""The paper-recipe configs hold the originals' hyper-parameters, read from
the merged configs (not the file text): the official TL-Align code for DeiT
(Euphoria16/TL-Align main_tla.py defaults), Swin's recipe, the paper's
B-model protocol, the SPT/LSA code's model settings and mixing, DeiT's
transfer recipe and the Swin authors' Cascade Mask R-CNN schedule. Each
expected value is written here from the source named in the config's
header, not copied from the config."""
import math
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.optim.scheduler import CosineAnnealingLR, LinearLR
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

from . import config_snapshot


def load(rel_path: str) -> Config:
    """The config ``configs/<rel_path>``, parsed once per session."""
    return config_snapshot.load(osp.join('configs', rel_path))


DEIT = ['deit-tiny', 'deit-small', 'deit-base']


def timm_cosine(epoch, lr, warmup_lr, min_lr, warmup, epochs):
    """timm's CosineLRScheduler per epoch (t_in_epochs, no warm-up prefix,
    as DeiT's create_scheduler builds it): linear warm-up from warmup_lr,
    then min_lr + (lr - min_lr) (1 + cos(pi t / epochs)) / 2."""
    if epoch < warmup:
        return warmup_lr + epoch * (lr - warmup_lr) / warmup
    return min_lr + 0.5 * (lr - min_lr) * (
        1 + math.cos(math.pi * epoch / epochs))


_SCHEDULERS = dict(LinearLR=LinearLR, CosineAnnealingLR=CosineAnnealingLR)


def epoch_lrs(cfg: Config, epochs: int) -> list:
    """The lr of each epoch under the config's by-epoch param_scheduler."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=cfg.optim_wrapper.optimizer.lr)
    wrapper = OptimWrapper(optimizer)
    schedulers = []
    for s in cfg.param_scheduler:
        s = dict(s)
        s.pop('_scope_', None)
        assert s.pop('by_epoch') is True
        assert not s.pop('convert_to_iter_based', False)
        schedulers.append(_SCHEDULERS[s.pop('type')](wrapper, **s))
    lrs = []
    for _ in range(epochs):
        lrs.append(optimizer.param_groups[0]['lr'])
        for s in schedulers:
            s.step()
    return lrs


# ------------------------------------------------------- DeiT, the paper ---
@pytest.mark.parametrize('arch', DEIT)
def test_deit_paper_recipe_is_the_official_codes(arch):
    cfg = load(f'tlalign/{arch}_8xb128-amp-paper-tlalign_in1k.py')
    model = cfg.model
    assert model.type == 'TLAlignClassifier' and model.target == 'tlalign'
    assert model.backbone.arch == arch
    assert model.backbone.drop_path_rate == 0.1          # --drop-path
    assert model.align_cfg == dict(follow_drop_path=False)
    # --mixup 0.0 --cutmix 1.0 --mixup-prob 1.0: token CutMix, every batch
    assert model.train_cfg.augments == [
        dict(type='TLTokenCutMix', alpha=1.0, box_units='tokens')]
    assert model.train_cfg.get('probs') is None
    assert model.head.loss == dict(type='LabelSmoothLoss',
                                   label_smooth_val=0.1, mode='original')
    # 8 GPUs x --batch-size 128, repeated augmentation
    assert cfg.train_dataloader.batch_size == 128
    assert cfg.auto_scale_lr.base_batch_size == 8 * 128
    assert cfg.train_dataloader.sampler == dict(
        type='RepeatAugSampler', num_repeats=3, shuffle=True)
    pipeline = {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}
    assert pipeline['RandomErasing']['erase_prob'] == 0.25   # --reprob
    assert pipeline['RandomErasing']['mode'] == 'rand'       # 'pixel'
    assert pipeline['RandAugment']['magnitude_level'] == 9   # rand-m9
    assert pipeline['RandAugment']['magnitude_std'] == 0.5   # -mstd0.5
    # --opt adamw, lr 5e-4 * 1024 / 512, --weight-decay 0.05, no clipping,
    # NativeScaler
    opt = cfg.optim_wrapper.optimizer
    assert opt.type == 'AdamW' and opt.lr == pytest.approx(1e-3)
    assert (opt.weight_decay, opt.eps, tuple(opt.betas)) == (
        0.05, 1e-8, (0.9, 0.999))
    assert cfg.optim_wrapper.clip_grad is None
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.train_cfg.max_epochs == 300
    assert 'EMAHook' not in [h['type'] for h in cfg.get('custom_hooks', [])]
    assert (cfg.randomness.seed, cfg.randomness.diff_rank_seed) == (0, True)


@pytest.mark.parametrize('arch', DEIT)
def test_deit_paper_init_is_timms(arch):
    """timm's VisionTransformer.init_weights('') in the official code
    (timm/models/vision_transformer.py:328-339, 424-456): the head and the
    class token truncated normal 0.02 (mmpretrain: both zero)."""
    cfg = load(f'tlalign/{arch}_8xb128-amp-paper-tlalign_in1k.py')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    head = model.head.layers.head
    for p, n in [(head.weight, head.weight.numel()),
                 (model.backbone.cls_token, model.backbone.cls_token.numel())]:
        std = p.detach().std().item()
        assert abs(std - 0.02) < 5 * 0.02 / math.sqrt(2 * n), std
    assert not head.bias.any()


def test_deit_paper_epoch_drops_the_last_batch():
    """main_tla.py:222-228 drop_last=True; with RASampler's floor(N // 256 *
    256 / 8) per rank, 1251 iterations of 8 x 128 on ImageNet."""
    from mmpretrain.datasets.samplers import RepeatAugSampler
    cfg = load('tlalign/deit-small_8xb128-amp-paper-tlalign_in1k.py')
    assert cfg.train_dataloader.drop_last is True
    n = 1281167
    official = math.floor(n // 256 * 256 / 8) // 128
    sampler = RepeatAugSampler(list(range(n)), num_repeats=3, seed=0)
    sampler.world_size = 8  # as on rank 0 of 8
    per_rank = math.ceil(n / 8)  # mmpretrain's num_selected_samples
    assert per_rank // cfg.train_dataloader.batch_size == official == 1251


def test_deit_paper_schedule_is_timms_per_epoch_cosine():
    """--sched cosine --warmup-epochs 5 --warmup-lr 1e-6 --min-lr 1e-5 over
    300 epochs, stepped once per epoch."""
    cfg = load('tlalign/deit-small_8xb128-amp-paper-tlalign_in1k.py')
    got = epoch_lrs(cfg, 300)
    want = [timm_cosine(e, 1e-3, 1e-6, 1e-5, 5, 300) for e in range(300)]
    worst = max(abs(g - w) / w for g, w in zip(got, want))
    assert worst < 5e-4, worst


def test_deit_paper_model_builds_with_the_token_grid():
    cfg = load('tlalign/deit-tiny_8xb128-amp-paper-tlalign_in1k.py')
    model = MODELS.build(cfg.model)
    aug, = model.data_preprocessor.batch_augments.augments
    assert type(aug).__name__ == 'TLTokenCutMix'
    assert aug.patch_size == 16 and aug.box_units == 'tokens'
    assert model.align_cfg['follow_drop_path'] is False


# ------------------------------------------------------- Swin, the paper ---
@pytest.mark.parametrize('arch,drop_path', [('swin-tiny', 0.2),
                                            ('swin-small', 0.3)])
def test_swin_paper_recipe_is_swins(arch, drop_path):
    """microsoft/Swin-Transformer config.py and configs/swin/*.yaml."""
    cfg = load(f'tlalign/{arch}_16xb64-amp-paper-tlalign_in1k.py')
    assert cfg.model.backbone.drop_path_rate == drop_path
    assert cfg.model.align_cfg == dict(follow_drop_path=False)
    assert [(a.type, a.alpha) for a in cfg.model.train_cfg.augments] == [
        ('Mixup', 0.8), ('CutMix', 1.0)]
    assert cfg.model.train_cfg.get('probs') is None  # 0.5 / 0.5, always
    opt = cfg.optim_wrapper.optimizer
    assert opt.lr == pytest.approx(5e-4 * 1024 / 512)
    assert opt.weight_decay == 0.05
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=5.0)
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert 16 * cfg.train_dataloader.batch_size == 1024
    warmup, cosine = cfg.param_scheduler
    assert warmup.end == 20 and warmup.convert_to_iter_based
    assert warmup.start_factor == pytest.approx(5e-7 / 5e-4)
    assert cosine.eta_min == pytest.approx(5e-6 * 1024 / 512)
    assert cfg.train_cfg.max_epochs == 300


def swin_lr(t, warmup, total, lr=1e-3, warmup_lr=1e-6, min_lr=1e-5):
    """Swin's lr at update t (lr_scheduler.py:24-34: timm's CosineLRScheduler,
    t_in_epochs=False, warmup_prefix=True, t_initial = total - warmup)."""
    if t < warmup:
        return warmup_lr + t * (lr - warmup_lr) / warmup
    return min_lr + 0.5 * (lr - min_lr) * (
        1 + math.cos(math.pi * (t - warmup) / (total - warmup)))


@pytest.mark.parametrize('arch', ['swin-tiny', 'swin-small'])
@pytest.mark.parametrize('twin', ['cutmix', 'tlalign'])
def test_swin_paper_schedule_steps_every_iteration(arch, twin):
    """main.py:205 steps Swin's scheduler every iteration; the built
    schedulers (as the Runner builds them, 10 iterations an epoch) give its
    lr at iterations 0, 1, mid-warm-up, the end of the warm-up and the
    middle of the cosine. One named difference: mmengine's LinearLR reaches
    the peak at the warm-up's last iteration (slope 1 / (W - 1), not
    1 / W), so inside the warm-up the lr is up to 1 / (W - 1) higher
    (4e-5 with Swin's 20 x 1251 warm-up iterations)."""
    from mmengine.registry import PARAM_SCHEDULERS, DefaultScope
    cfg = load(f'tlalign/{arch}_16xb64-amp-paper-{twin}_in1k.py')
    assert cfg.train_dataloader.drop_last is True  # data/build.py:74
    epoch_length, epochs = 10, cfg.train_cfg.max_epochs
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=cfg.optim_wrapper.optimizer.lr)
    wrapper = OptimWrapper(optimizer)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        schedulers = [
            PARAM_SCHEDULERS.build(
                dict(s), default_args=dict(optimizer=wrapper,
                                           epoch_length=epoch_length))
            for s in cfg.param_scheduler]
    assert all(not s.by_epoch for s in schedulers)
    warmup, total = 20 * epoch_length, epochs * epoch_length
    middle = warmup + (total - warmup) // 2
    wanted = {0, 1, warmup // 2, warmup, middle}
    got = {}
    for t in range(middle + 1):
        if t in wanted:
            got[t] = optimizer.param_groups[0]['lr']
        for s in schedulers:
            s.step()
    for t in sorted(wanted):
        want = swin_lr(t, warmup, total)
        if 0 < t < warmup:
            assert got[t] == pytest.approx(
                1e-6 + t * (1e-3 - 1e-6) / (warmup - 1), rel=1e-6)
            assert want < got[t] <= want * (1 + 1 / (warmup - 1)), t
        else:
            assert got[t] == pytest.approx(want, rel=1e-6), t
