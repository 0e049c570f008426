# CIFAR-10 (50,000 train / 10,000 test images, 32x32)
# fine-tuned at 224x224 with DeiT's transfer recipe:
# DeiT's ImageNet augmentations without random erasing (RandomResizedCrop
# 224, flip, RandAugment rand-m9-mstd0.5-inc1; Mixup/CutMix are in the
# model's train_cfg), repeated augmentation x3, ImageNet normalisation,
# 8 GPUs x 96 images; evaluation
# resizes the short edge to 256 and centre-crops 224, as DeiT does.
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

train_pipeline = [
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[round(x) for x in pad_mean],
                     interpolation='bicubic')),
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
