# ResizeMix (Qin et al. 2020) on mmpretrain's DeiT-Small recipe: the CutMix
# twin (deit-small_4xb256-cutmix_in1k.py) with its per-batch CutMix 1.0
# swapped for mmpretrain's ResizeMix at its defaults (the whole partner image
# resized into the box; lam in [0.1, 0.8], Beta(1, 1): uniform). Mixup 0.8
# and everything else unchanged. No mmpretrain 1.2.0 config uses ResizeMix.
# Compare with deit-small_4xb256-resizemix-tlalign_in1k.py (only the target
# differs).
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']

model = dict(train_cfg=dict(augments=[
    dict(type='Mixup', alpha=0.8),
    dict(type='ResizeMix', alpha=1.0, lam_min=0.1, lam_max=0.8),
]))
