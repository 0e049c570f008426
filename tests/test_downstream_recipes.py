"""The transfer and Cascade Mask R-CNN configs hold their originals'
recipes (DeiT's transfer recipe, facebookresearch/deit issue 45; the Swin
authors' detection config), read from the merged configs."""

import pytest
import torch
from mmpretrain.registry import MODELS

import tlalign_mm  # noqa: F401

from .test_paper_configs import epoch_lrs, load, timm_cosine


# ----------------------------------------------------- downstream recipes ---
def test_transfer_recipe_is_deits():
    """facebookresearch/deit issue 45 plus main.py's ImageNet defaults."""
    cfg = load('transfer/deit-small_tlalign-in1k-pre_8xb96-1000e_cifar10.py')
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.momentum, opt.weight_decay,
            opt.nesterov) == ('SGD', 0.01, 0.9, 1e-4, True)
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.train_dataloader.sampler.type == 'RepeatAugSampler'
    assert cfg.train_dataloader.sampler.num_repeats == 3
    assert cfg.train_dataloader.drop_last is True  # DeiT main.py:241
    assert 8 * cfg.train_dataloader.batch_size == 768
    assert cfg.model.backbone.drop_path_rate == 0.0
    assert 'RandomErasing' not in [
        t['type'] for t in cfg.train_dataloader.dataset.pipeline]
    got = epoch_lrs(cfg, 1000)
    want = [timm_cosine(e, 0.01, 1e-6, 1e-5, 5, 1000) for e in range(1000)]
    worst = max(abs(g - w) / w for g, w in zip(got, want))
    assert worst < 1e-3, worst


def test_transfer_head_starts_truncated_normal():
    cfg = load('transfer/deit-tiny_tlalign-in1k-pre_8xb96-1000e_cifar10.py')
    model_cfg = cfg.model
    model_cfg.backbone.pop('init_cfg')  # no checkpoint here
    torch.manual_seed(0)
    model = MODELS.build(model_cfg)
    model.init_weights()
    head = model.head.layers.head
    # timm's trunc_normal_(std=.02) and mmengine's TruncNormal both cut at
    # +-2 (absolute), 100 std: in effect a normal with std 0.02
    assert head.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert head.weight.abs().max() <= 2
    assert torch.equal(head.bias, torch.zeros_like(head.bias))


def test_cascade_schedule_is_the_swin_detection_configs():
    cfg = load('cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_tlalign'
               '-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py')
    warmup, steps = cfg.param_scheduler
    assert (warmup.type, warmup.by_epoch, warmup.end, warmup.start_factor) \
        == ('LinearLR', False, 500, 0.001)
    assert (steps.type, steps.milestones, steps.gamma) == (
        'MultiStepLR', [27, 33], 0.1)
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.optimizer.lr == 1e-4
    assert cfg.train_cfg.max_epochs == 36


# ------------------------------------------------------------ collation ---
@pytest.mark.parametrize('rel', [
    'upernet/upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-'
    '512x512.py',
    'upernet/upernet_deit-small-p16-ln-mln_cutmix-in1k-pre_8xb2-160k_'
    'ade20k-512x512.py',
    'cascade_mask_rcnn/cascade-mask-rcnn_swin-tiny-p4-w7_tlalign-in1k-pre_'
    'fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',
    'tlalign/deit-tiny_4xb256-tlalign_in1k.py',
])
def test_train_tool_collates_by_scope(rel, monkeypatch):
    """tools/train.py sets mmpretrain's default_collate for mmpretrain
    configs only; mmseg/mmdet configs set nothing and keep the Runner's
    pseudo_collate (their data preprocessors pad images of several
    sizes)."""
    import sys

    from .config_snapshot import ROOT
    from .tool_scripts import load_tool
    train = load_tool('train.py')
    cfg = load(rel)
    assert 'collate_fn' not in cfg.train_dataloader
    monkeypatch.setattr(sys, 'argv', [
        'train.py', f'{ROOT}/configs/{rel}', '--work-dir', 'work_dirs/x'])
    cfg = train.merge_args(cfg, train.parse_args())
    for field in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        collate = cfg[field].get('collate_fn')
        if cfg.default_scope == 'mmpretrain':
            assert collate == dict(type='default_collate')
        else:
            assert collate is None
