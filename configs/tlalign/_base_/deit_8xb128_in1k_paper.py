# The TL-Align paper's DeiT ImageNet recipe for every DeiT size, with the
# plain area target of the token-CutMix box (target='cutmix'; the
# *-paper-tlalign_in1k.py twins switch the target to 'tlalign'). Token
# CutMix has no mmpretrain augment, so this CutMix twin is TLAlignClassifier
# itself with target='cutmix' (the TL-Align twin's sampler, the area
# target: trains exactly as an ImageClassifier would). No size:
# the arch and the head's width are each config's
# (deit-{tiny,small,base}_8xb128-amp-paper-cutmix_in1k.py). Composed as
# mmpretrain's deit/deit-*_4xb256_in1k.py configs are (its ImageNet data
# pipeline, AdamW schedule and runtime bases), with their DeiT model and
# AdamW no-decay groups restated here. Every setting below is the official
# code's default,
# Euphoria16/TL-Align at 2a3f35c (main_tla.py get_args_parser, run as
# train_deit_small_tla.sh: 8 GPUs x --batch-size 128, --mixup 0.0 as in the
# README's command):
#   model     deit_{tiny,small,base}_patch16_224 (models.py: qkv_bias,
#             LayerNorm eps 1e-6 = mmpretrain's arch='deit-*'); --drop 0.0,
#             --drop-path 0.1; no EMA (--model-ema off)
#   data      RandomResizedCrop 224 bicubic, flip, RandAugment
#             rand-m9-mstd0.5-inc1, random erasing 0.25 'pixel' (the
#             mmpretrain ImageNet pipeline below is the same); repeated
#             augmentation x3 (--repeated-aug on: DeiT's RASampler, here
#             mmpretrain's port, RepeatAugSampler); 8 x 128 = 1024 images
#   mixing    every batch (--mixup-prob 1.0), token CutMix only (--mixup
#             0.0, --cutmix 1.0): tla.py TL_AlignMix draws the box in token
#             units (rand_token_bbox) = TLTokenCutMix(box_units='tokens')
#   loss      label smoothing 0.1 (--smoothing, applied to the mixed target)
#   optimiser AdamW lr 5e-4 x 1024 / 512 = 1e-3, eps 1e-8, betas (0.9,
#             0.999), weight decay 0.05 except biases, norms, pos_embed and
#             cls_token (timm create_optimizer's no-decay list = the
#             paramwise_cfg of mmpretrain's DeiT, below); no gradient
#             clipping (--clip-grad None); mixed precision (NativeScaler +
#             autocast in engine.py): AmpOptimWrapper
#   schedule  300 epochs; timm's per-epoch cosine (t_initial 300, min lr
#             1e-5) after 5 linear warm-up epochs from 1e-6: expressed with
#             mmengine's chained LinearLR + CosineAnnealingLR, which give
#             timm's per-epoch lr to 5e-4 (relative) over all 300 epochs
#             (tests/test_paper_configs.py)
#   init      timm's VisionTransformer.init_weights('') (timm/models/
#             vision_transformer.py:328-339, 424-456): apply(_init_vit_weights)
#             passes no name, so the head is truncated normal 0.02 like
#             every Linear, not zero; cls_token and pos_embed truncated
#             normal 0.02 (mmpretrain: a zero head and a zero cls_token)
#   epoch     drop_last=True (main_tla.py:222-228); RASampler's per-rank
#             count floor(N // 256 * 256 / world) (samplers.py:36) against
#             mmpretrain's ceil(N / world): with drop_last both give 1251
#             iterations of 8 x 128 on ImageNet's 1,281,167 images
#   seed      0, plus the rank (--seed 0; seed + utils.get_rank())
# Remaining differences (docs/recipes.md): pairs by torch.randperm instead of
# x.flip(0); no one-epoch lag of the lr (the official loop calls
# lr_scheduler.step(epoch) after epoch `epoch`, so it trains epoch e at
# f(e - 1)); mmengine's AMP wrapper instead of NativeScaler; the MLP
# Linears start xavier-uniform (mmpretrain's TransformerEncoderLayer
# re-initialises them after every init_cfg) where timm's are truncated
# normal 0.02.
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
    '../../_base_/resumable_runtime.py',  # last.pth every 500 iters
]
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)

model = dict(
    type='TLAlignClassifier',
    target='cutmix',
    backbone=dict(
        type='VisionTransformer',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.1,
        init_cfg=[dict(type='TruncNormalParams', names=['cls_token'],
                       std=.02)]),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='TLTokenCutMix', alpha=1.0, box_units='tokens'),
    ]),
)
train_dataloader = dict(
    batch_size=128,
    drop_last=True,
    sampler=dict(_delete_=True, type='RepeatAugSampler', num_repeats=3,
                 shuffle=True))
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
    clip_grad=None)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=6),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=0,
         end=300, T_max=300),
]
randomness = dict(seed=0, diff_rank_seed=True)
auto_scale_lr = dict(base_batch_size=1024)
