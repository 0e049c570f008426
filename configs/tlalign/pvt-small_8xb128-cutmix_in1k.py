# The CutMix twin: PVT-Small's recipe (DeiT's: 300 epochs, AdamW lr 1e-3 at
# batch 1024, weight decay 0.05, 5 warm-up epochs, cosine, Mixup 0.8 / CutMix
# 1.0, label smoothing 0.1, RandAugment, random erasing, drop-path 0.1).
_base_ = [
    '../_base_/models/pvt_in1k.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
    '../_base_/resumable_runtime.py',  # last.pth every 500 iters
]

model = dict(backbone=dict(num_layers=[3,4,6,3]))
train_dataloader = dict(batch_size=128)
optim_wrapper = dict(clip_grad=None)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5)
]
