# DeiT's transfer-learning schedule, as its authors gave it for CIFAR-10 and
# Stanford Cars (facebookresearch/deit issue 45, comment 765213622): SGD,
# lr 0.01 at a total batch of 768 (the lr after DeiT's linear scaling, as
# the authors state their fine-tuning lrs in deit issue 141), weight decay
# 1e-4, 1000 epochs; random erasing and stochastic depth removed; "all
# other elements are the same as for training on ImageNet", i.e. DeiT's
# main.py defaults: timm's 'sgd' (Nesterov momentum 0.9: timm's optimizer
# factory), no weight decay on biases, norms, pos_embed and cls_token (timm
# create_optimizer), mixed precision (NativeScaler: AmpOptimWrapper here),
# no gradient clipping, timm's per-epoch cosine (t_initial 1000, min lr
# 1e-5) after 5 warm-up epochs from 1e-6 (written with mmengine's chained
# LinearLR + CosineAnnealingLR, which give timm's per-epoch lr to within
# 1e-3 relative), RandAugment, Mixup 0.8 / CutMix 1.0, label smoothing 0.1
# and repeated augmentation (in the dataset and model bases). The same
# schedule serves CIFAR-100 and Flowers-102 here. Kept differences: no EMA
# (DeiT keeps one but reports the model itself), no one-epoch lr lag (see
# docs/recipes.md).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='SGD', lr=0.01, momentum=0.9, weight_decay=1e-4, nesterov=True),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0, end=6),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=0,
         end=1000, T_max=1000),
]
train_cfg = dict(by_epoch=True, max_epochs=1000, val_interval=10)
val_cfg = dict()
test_cfg = dict()
# 8 GPUs x 96 images; `tools/train.py --auto-scale-lr` rescales lr linearly
auto_scale_lr = dict(base_batch_size=768)
