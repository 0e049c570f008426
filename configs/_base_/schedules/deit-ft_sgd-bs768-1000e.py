# DeiT's transfer-learning schedule, as its authors gave it for CIFAR-10 and
# Stanford Cars (facebookresearch/deit#45): SGD (momentum 0.9), lr 0.01 at a
# total batch of 768, weight decay 1e-4, 1000 epochs, cosine decay after a
# 5-epoch linear warm-up (DeiT's warm-up lr 1e-6, min lr 1e-5); random
# erasing and stochastic depth removed, the rest of DeiT's ImageNet recipe
# kept (RandAugment, Mixup 0.8 / CutMix 1.0, label smoothing 0.1). The same
# schedule serves CIFAR-100 and Flowers-102 here.
optim_wrapper = dict(
    optimizer=dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0, end=5,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=5,
         end=1000, T_max=995, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=1000, val_interval=10)
val_cfg = dict()
test_cfg = dict()
# 8 GPUs x 96 images; `tools/train.py --auto-scale-lr` rescales lr linearly
auto_scale_lr = dict(base_batch_size=768)
