# The paper recipe's CutMix twin for Swin-S: Swin's own ImageNet recipe, as
# the TL-Align paper trains Swin (its official code, Euphoria16/TL-Align,
# covers DeiT only). The recipe is microsoft/Swin-Transformer at f82860b
# (config.py defaults, configs/swin/swin_small_patch4_window7_224.yaml, run on
# 8 GPUs x 128 images), which mmpretrain's swin_transformer/
# swin-small_16xb64_in1k.py (the base, 16 x 64 = 1024 images) ports:
#   AdamW lr 5e-4 x 1024 / 512 = 1e-3, weight decay 0.05 (none on norms,
#   biases and relative position bias tables), eps 1e-8, betas (0.9,
#   0.999), gradient clipping 5.0; 300 epochs, 20 warm-up epochs from
#   5e-7 x 2 = 1e-6, per-iteration cosine to 5e-6 x 2 = 1e-5 (warm-up
#   prefix: the cosine starts after the warm-up); drop-path 0.3; label
#   smoothing 0.1; every batch mixed, Mixup 0.8 or CutMix 1.0 with
#   probability 0.5 each; RandAugment rand-m9-mstd0.5-inc1, random erasing
#   0.25 'pixel'; no repeated augmentation, no EMA.
# Added here: mixed precision (AMP_ENABLE True in config.py):
# AmpOptimWrapper. Compare with swin-small_16xb64_in1k_cutmix.py (ours: the
# same in fp32).
_base_ = ['./swin-small_16xb64_in1k_cutmix.py']

optim_wrapper = dict(type='AmpOptimWrapper', loss_scale='dynamic')
