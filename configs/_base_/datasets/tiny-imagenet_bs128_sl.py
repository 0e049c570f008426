# Tiny-ImageNet-200 (64x64, 200 classes) with the SL-ViT recipe, as
# aanna0701/SPT_LSA_ViT at 54bd796 trains it (main.py:169-223): flip,
# random crop (padding 4), AutoAugment with its ImageNetPolicy, normalisation,
# random erasing 0.25, batches of 128 from an epoch of three shuffled passes.
#
# A class-folder layout read by mmpretrain's CustomDataset (TinyImageNet
# adds a layout check); no download, ever:
#   data/tiny-imagenet-200/train/<wnid>/images/*.JPEG   (as unpacked)
#   data/tiny-imagenet-200/val/<wnid>/*.JPEG
# The archive's val/ is flat (val/images + val/val_annotations.txt); move the
# images into class folders once:
#   cd data/tiny-imagenet-200/val && while read f c _; do mkdir -p $c && \
#       mv images/$f $c/; done < val_annotations.txt && rmdir images
#
# Decoded by PIL as the original's ImageFolder (torchvision's pil_loader:
# Image.open(f).convert('RGB'), no EXIF rotation; utils/dataloader.py:77-82),
# into a BGR array (mmcv's pillow backend) as the rest of the pipeline
# expects.
dataset_type = 'TinyImageNet'
load_image = dict(type='LoadImageFromFile', imdecode_backend='pillow',
                  color_type='color_ignore_orientation')
data_root = 'data/tiny-imagenet-200'
# utils/dataloader.py:36, in 0..255 (the data preprocessor normalises).
norm_mean = (0.4802, 0.4481, 0.3975)
norm_std = (0.2770, 0.2691, 0.2821)
rgb_mean = [255 * m for m in norm_mean]
rgb_std = [255 * s for s in norm_std]
data_preprocessor = dict(
    num_classes=200,
    mean=rgb_mean,
    std=rgb_std,
    to_rgb=True,  # images are loaded as BGR
)

# The SPT/LSA code's ImageNetPolicy (DeepVoltaire's; utils/autoaug.py:21-52,
# used for Tiny-ImageNet, main.py:194-198), its 25 sub-policies in order,
# mapped as in cifar10_bs128_sl.py: Rotate by +angle in PIL's sense (mmcv
# -angle, never negated), everything filled with 128; Rotate, Color and
# Contrast computed with PIL (on the BGR arrays LoadImageFromFile gives);
# HParamsAutoAugment: mmpretrain's AutoAugment with its hparams applied
# (see cifar10_bs128_sl.py).
aa_translate_step = 150 / 331 / 9
imagenet_autoaugment_policies = [
    [dict(type='Posterize', bits=4, prob=0.4),
     dict(type='PILRotate', angle=-30 / 9 * 9, prob=0.6,
          random_negative_prob=0.)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 5, prob=0.6),
     dict(type='AutoContrast', prob=0.6)],
    [dict(type='Equalize', prob=0.8),
     dict(type='Equalize', prob=0.6)],
    [dict(type='Posterize', bits=5, prob=0.6),
     dict(type='Posterize', bits=5, prob=0.6)],
    [dict(type='Equalize', prob=0.4),
     dict(type='Solarize', thr=256 - 256 / 9 * 4, prob=0.2)],
    [dict(type='Equalize', prob=0.4),
     dict(type='PILRotate', angle=-30 / 9 * 8, prob=0.8,
          random_negative_prob=0.)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 3, prob=0.6),
     dict(type='Equalize', prob=0.6)],
    [dict(type='Posterize', bits=6, prob=0.8),
     dict(type='Equalize', prob=1.0)],
    [dict(type='PILRotate', angle=-30 / 9 * 3, prob=0.2,
          random_negative_prob=0.),
     dict(type='Solarize', thr=256 - 256 / 9 * 8, prob=0.6)],
    [dict(type='Equalize', prob=0.6),
     dict(type='Posterize', bits=5, prob=0.4)],
    [dict(type='PILRotate', angle=-30 / 9 * 8, prob=0.8,
          random_negative_prob=0.),
     dict(type='PILColorTransform', magnitude=0.0, prob=0.4)],
    [dict(type='PILRotate', angle=-30 / 9 * 9, prob=0.4,
          random_negative_prob=0.),
     dict(type='Equalize', prob=0.6)],
    [dict(type='Equalize', prob=0.0),
     dict(type='Equalize', prob=0.8)],
    [dict(type='Invert', prob=0.6),
     dict(type='Equalize', prob=1.0)],
    [dict(type='PILColorTransform', magnitude=0.4, prob=0.6),
     dict(type='PILContrast', magnitude=0.8, prob=1.0)],
    [dict(type='PILRotate', angle=-30 / 9 * 8, prob=0.8,
          random_negative_prob=0.),
     dict(type='PILColorTransform', magnitude=0.2, prob=1.0)],
    [dict(type='PILColorTransform', magnitude=0.8, prob=0.8),
     dict(type='Solarize', thr=256 - 256 / 9 * 7, prob=0.8)],
    [dict(type='Sharpness', magnitude=0.7, prob=0.4),
     dict(type='Invert', prob=0.6)],
    [dict(type='Shear', magnitude=0.3 / 9 * 5, prob=0.6,
          direction='horizontal'),
     dict(type='Equalize', prob=1.0)],
    [dict(type='PILColorTransform', magnitude=0.0, prob=0.4),
     dict(type='Equalize', prob=0.6)],
    [dict(type='Equalize', prob=0.4),
     dict(type='Solarize', thr=256 - 256 / 9 * 4, prob=0.2)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 5, prob=0.6),
     dict(type='AutoContrast', prob=0.6)],
    [dict(type='Invert', prob=0.6),
     dict(type='Equalize', prob=1.0)],
    [dict(type='PILColorTransform', magnitude=0.4, prob=0.6),
     dict(type='PILContrast', magnitude=0.8, prob=1.0)],
    [dict(type='Equalize', prob=0.8),
     dict(type='Equalize', prob=0.6)],
]

# Random erasing after Normalize with the mean numbers as the fill
# (main.py:206-214; see cifar10_bs128_sl.py), in the images' BGR order.
erase_fill = [m + s * v for m, s, v in zip(rgb_mean, rgb_std, norm_mean)]
train_pipeline = [
    load_image,
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandomCrop', crop_size=64, padding=4),
    dict(type='HParamsAutoAugment', policies=imagenet_autoaugment_policies,
         hparams=dict(pad_val=128, channel_order='bgr')),
    dict(type='ZhongRandomErasing', erase_prob=0.25, min_area_ratio=0.02,
         max_area_ratio=0.4, min_aspect=0.3, fill=erase_fill[::-1]),
    dict(type='PackInputs'),
]
test_pipeline = [
    load_image,
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=128,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='train',
                 pipeline=train_pipeline),
    # The original's epoch (SPT_LSA_ViT main.py:221-223): three shuffled
    # passes, the last partial batch dropped (2343 iterations on 100,000).
    sampler=dict(type='MultiPassSampler', num_passes=3, shuffle=True),
    drop_last=True,
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
