# The paper recipe's CutMix twin for Swin-T: Swin's own ImageNet recipe, as
# the TL-Align paper trains Swin (its official code, Euphoria16/TL-Align,
# covers DeiT only). The recipe is microsoft/Swin-Transformer at f82860b
# (config.py defaults, configs/swin/swin_tiny_patch4_window7_224.yaml, run on
# 8 GPUs x 128 images), which mmpretrain's swin_transformer/
# swin-tiny_16xb64_in1k.py (the base, 16 x 64 = 1024 images) ports:
#   AdamW lr 5e-4 x 1024 / 512 = 1e-3, weight decay 0.05 (none on norms,
#   biases and relative position bias tables), eps 1e-8, betas (0.9,
#   0.999), gradient clipping 5.0; 300 epochs, 20 warm-up epochs from
#   5e-7 x 2 = 1e-6, then cosine to 5e-6 x 2 = 1e-5, both stepped every
#   iteration (lr_scheduler.py:16-34: timm's CosineLRScheduler with
#   t_in_epochs=False, warmup_prefix=True, so the cosine spans the 280
#   epochs after the warm-up; main.py:205 step_update per iteration);
#   drop-path 0.2; label
#   smoothing 0.1; every batch mixed, Mixup 0.8 or CutMix 1.0 with
#   probability 0.5 each; RandAugment rand-m9-mstd0.5-inc1, random erasing
#   0.25 'pixel'; no repeated augmentation, no EMA; DistributedSampler
#   with drop_last=True (data/build.py:58-74): 1251 iterations of 1024;
#   seed 0 + rank (main.py:319-323, config.py:256).
# Changed from the base: AMP (AMP_ENABLE True in config.py) as
# AmpOptimWrapper; the cosine converted to iterations (mmpretrain's steps
# it per epoch); drop_last. Remaining: Swin's loop calls step_update(t)
# after iteration t, so it trains iteration t >= 1 at f(t - 1); ours at
# f(t) (docs/recipes.md). Compare with swin-tiny_16xb64-cutmix_in1k.py (ours: the
# same in fp32).
_base_ = ['./swin-tiny_16xb64-cutmix_in1k.py']

optim_wrapper = dict(type='AmpOptimWrapper', loss_scale='dynamic')
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=20,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=20,
         end=300, T_max=280, convert_to_iter_based=True),
]
train_dataloader = dict(drop_last=True)
randomness = dict(seed=0, diff_rank_seed=True)  # Swin's main.py:319
