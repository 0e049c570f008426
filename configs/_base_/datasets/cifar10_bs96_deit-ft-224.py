# CIFAR-10 (50,000 train / 10,000 test images, 32x32)
# fine-tuned at 224x224 with DeiT's transfer recipe:
# DeiT's ImageNet augmentations without random erasing (RandomResizedCrop
# 224, flip, RandAugment rand-m9-mstd0.5-inc1; Mixup/CutMix are in the
# model's train_cfg), repeated augmentation x3, ImageNet normalisation,
# 8 GPUs x 96 images; evaluation
# resizes the short edge to 256 and centre-crops 224, as DeiT does.
# RandAugment's policies are mmpretrain's 'timm_increasing' (timm's
# _RAND_INCREASING_TRANSFORMS), written out with ColorTransform and Contrast
# computed by PIL on these RGB arrays (tlalign_mm's PILColorTransform and
# PILContrast, given channel_order='rgb' through RandAugment's hparams,
# which RandAugment merges into each op): mmpretrain's ops take mmcv's BGR
# grey weights, red and blue swapped on CIFAR's RGB arrays, where timm's
# (DeiT's) ImageEnhance.Color/Contrast weigh the RGB PIL image. Every other
# op, argument and random draw is mmpretrain's.
# Layout:
# data/cifar10/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}
# (the official "python version" archive, extracted; never downloaded)
dataset_type = 'LocalCIFAR10'
data_preprocessor = dict(
    num_classes=10,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=False  # CIFAR arrays are already RGB,
)
pad_mean = data_preprocessor['mean']  # CIFAR arrays are RGB
# mmpretrain's RANDAUG_POLICIES['timm_increasing'] (auto_augment.py:
# 1218-1236), in order, but for the two PIL ops
rand_increasing_policies = [
    dict(type='AutoContrast'),
    dict(type='Equalize'),
    dict(type='Invert'),
    dict(type='Rotate', magnitude_range=(0, 30)),
    dict(type='Posterize', magnitude_range=(4, 0)),
    dict(type='Solarize', magnitude_range=(256, 0)),
    dict(type='SolarizeAdd', magnitude_range=(0, 110)),
    dict(type='PILColorTransform', magnitude_range=(0, 0.9)),
    dict(type='PILContrast', magnitude_range=(0, 0.9)),
    dict(type='Brightness', magnitude_range=(0, 0.9)),
    dict(type='Sharpness', magnitude_range=(0, 0.9)),
    dict(type='Shear', magnitude_range=(0, 0.3), direction='horizontal'),
    dict(type='Shear', magnitude_range=(0, 0.3), direction='vertical'),
    dict(type='Translate', magnitude_range=(0, 0.45),
         direction='horizontal'),
    dict(type='Translate', magnitude_range=(0, 0.45), direction='vertical'),
]

train_pipeline = [
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies=rand_increasing_policies,
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[round(x) for x in pad_mean],
                     interpolation='bicubic', channel_order='rgb')),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(
        type='ResizeEdge',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=96,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root='data/cifar10',
        split='train',
        pipeline=train_pipeline),
    # DeiT's repeated augmentation (RASampler; mmpretrain's port, whose
    # per-rank count is ceil(N / world) where DeiT's samplers.py:35 has
    # floor(N // 256 * 256 / world)), and DeiT's drop_last=True
    # (main.py:241): the same number of iterations for every transfer set
    # at 8 x 96 (65 CIFAR, 2 Flowers-102, 10 Stanford Cars per epoch).
    sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True),
    drop_last=True,
)
val_dataloader = dict(
    batch_size=96,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root='data/cifar10',
        split='test',
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
