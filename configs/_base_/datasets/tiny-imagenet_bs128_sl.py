# Tiny-ImageNet-200 (64x64, 200 classes) with the SL-ViT recipe: random crop
# (padding 4), flip, AutoAugment with mmpretrain's ImageNet policy, random
# erasing 0.25, batches of 128 with repeated augmentation x3.
#
# A class-folder layout read by mmpretrain's CustomDataset (TinyImageNet
# adds a layout check); no download, ever:
#   data/tiny-imagenet-200/train/<wnid>/images/*.JPEG   (as unpacked)
#   data/tiny-imagenet-200/val/<wnid>/*.JPEG
# The archive's val/ is flat (val/images + val/val_annotations.txt); move the
# images into class folders once:
#   cd data/tiny-imagenet-200/val && while read f c _; do mkdir -p $c && \
#       mv images/$f $c/; done < val_annotations.txt && rmdir images
dataset_type = 'TinyImageNet'
data_root = 'data/tiny-imagenet-200'
rgb_mean = [122.451, 114.266, 101.363]
rgb_std = [70.635, 68.621, 71.936]
data_preprocessor = dict(
    num_classes=200,
    mean=rgb_mean,
    std=rgb_std,
    to_rgb=True,  # images are loaded as BGR
)
bgr_mean = rgb_mean[::-1]

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomCrop', crop_size=64, padding=4),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='AutoAugment', policies='imagenet',
         hparams=dict(pad_val=[round(x) for x in bgr_mean])),
    dict(type='RandomErasing', erase_prob=0.25, mode='const',
         min_area_ratio=0.02, max_area_ratio=0.4, fill_color=bgr_mean),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=128,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='train',
                 pipeline=train_pipeline),
    sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='val',
                 pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
