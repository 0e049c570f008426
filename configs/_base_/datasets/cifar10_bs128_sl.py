# CIFAR-10 with the training recipe of "Vision Transformer for Small-Size
# Datasets" (Lee et al. 2021), as aanna0701/SPT_LSA_ViT at 54bd796 trains
# it (main.py:169-223): flip, random crop (padding 4), AutoAugment with the
# CIFAR-10 policy, normalisation, random erasing 0.25, batches of 128 from
# an epoch of three shuffled passes. CutMix/Mixup are the model's batch
# augments (see configs/sl_vit/_base_/).
#
# No download, ever: unpack cifar-10-python.tar.gz so that
#   data/cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}
# exist (or point data_root elsewhere). A missing file fails at build time
# with this layout in the message (LocalCIFAR10 = mmpretrain's CIFAR10 with
# download=False and that check).
dataset_type = 'LocalCIFAR10'
data_root = 'data/cifar10'
# utils/dataloader.py:12, in 0..255 (the data preprocessor normalises).
norm_mean = (0.4914, 0.4822, 0.4465)
norm_std = (0.2470, 0.2435, 0.2616)
rgb_mean = [255 * m for m in norm_mean]
rgb_std = [255 * s for s in norm_std]
data_preprocessor = dict(
    num_classes=10,
    mean=rgb_mean,
    std=rgb_std,
    to_rgb=False,  # mmpretrain's CIFAR arrays are RGB already
)

# AutoAugment's CIFAR-10 policy: the 25 sub-policies of the SPT/LSA code's
# CIFAR10Policy (DeepVoltaire's; utils/autoaug.py:76-106, used for CIFAR-10
# and CIFAR-100, main.py:180-185), in mmpretrain's transforms, in order.
# Magnitude index m of 0..9 maps as its SubPolicy (autoaug.py:170-185):
# shear 0.3*m/9, translate (150/331)*m/9 of the size, rotate 30*m/9
# degrees, color/contrast/sharpness/brightness 0.9*m/9 (= 0.1*m), posterize
# round(8 - 4*m/9) bits, solarize threshold 256 - 256*m/9. Shear,
# translate and the enhancements get a random sign (utils/transforms.py);
# Rotate does not: PIL's rotate(+angle), counter-clockwise
# (transforms.py:48-53), is mmcv's angle -angle (positive is clockwise
# there), never negated. Fill 128 (fillcolor=(128, 128, 128)).
# Rotate, Color and Contrast are computed with PIL as the original
# (tlalign_mm's PILRotate, PILColorTransform, PILContrast, told that
# mmpretrain's CIFAR arrays are RGB): mmpretrain's Rotate fills (128, 0, 0)
# from pad_val=128, and its Color/Contrast take BGR grey weights.
# HParamsAutoAugment (tlalign_mm) is mmpretrain's AutoAugment with a bug of
# mmpretrain 1.2.0 fixed: its AutoAugment builds the ops without its
# hparams (auto_augment.py:74-76), so the PIL ops were built with
# channel_order='bgr' on these RGB arrays.
aa_translate_step = 150 / 331 / 9
cifar10_autoaugment_policies = [
    [dict(type='Invert', prob=0.1),
     dict(type='PILContrast', magnitude=0.6, prob=0.2)],
    [dict(type='PILRotate', angle=-30 / 9 * 2, prob=0.7,
          random_negative_prob=0.),
     dict(type='Translate', magnitude=aa_translate_step * 9, prob=0.3,
          direction='horizontal')],
    [dict(type='Sharpness', magnitude=0.1, prob=0.8),
     dict(type='Sharpness', magnitude=0.3, prob=0.9)],
    [dict(type='Shear', magnitude=0.3 / 9 * 8, prob=0.5,
          direction='vertical'),
     dict(type='Translate', magnitude=aa_translate_step * 9, prob=0.7,
          direction='vertical')],
    [dict(type='AutoContrast', prob=0.5),
     dict(type='Equalize', prob=0.9)],
    [dict(type='Shear', magnitude=0.3 / 9 * 7, prob=0.2,
          direction='vertical'),
     dict(type='Posterize', bits=5, prob=0.3)],
    [dict(type='PILColorTransform', magnitude=0.3, prob=0.4),
     dict(type='Brightness', magnitude=0.7, prob=0.6)],
    [dict(type='Sharpness', magnitude=0.9, prob=0.3),
     dict(type='Brightness', magnitude=0.9, prob=0.7)],
    [dict(type='Equalize', prob=0.6),
     dict(type='Equalize', prob=0.5)],
    [dict(type='PILContrast', magnitude=0.7, prob=0.6),
     dict(type='Sharpness', magnitude=0.5, prob=0.6)],
    [dict(type='PILColorTransform', magnitude=0.7, prob=0.7),
     dict(type='Translate', magnitude=aa_translate_step * 8, prob=0.5,
          direction='horizontal')],
    [dict(type='Equalize', prob=0.3),
     dict(type='AutoContrast', prob=0.4)],
    [dict(type='Translate', magnitude=aa_translate_step * 3, prob=0.4,
          direction='vertical'),
     dict(type='Sharpness', magnitude=0.6, prob=0.2)],
    [dict(type='Brightness', magnitude=0.6, prob=0.9),
     dict(type='PILColorTransform', magnitude=0.8, prob=0.2)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 2, prob=0.5),
     dict(type='Invert', prob=0.0)],
    [dict(type='Equalize', prob=0.2),
     dict(type='AutoContrast', prob=0.6)],
    [dict(type='Equalize', prob=0.2),
     dict(type='Equalize', prob=0.6)],  # sub-policy 17, autoaug.py:96
    [dict(type='PILColorTransform', magnitude=0.9, prob=0.9),
     dict(type='Equalize', prob=0.6)],
    [dict(type='AutoContrast', prob=0.8),
     dict(type='Solarize', thr=256 - 256 / 9 * 8, prob=0.2)],
    [dict(type='Brightness', magnitude=0.3, prob=0.1),
     dict(type='PILColorTransform', magnitude=0.0, prob=0.7)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 5, prob=0.4),
     dict(type='AutoContrast', prob=0.9)],
    [dict(type='Translate', magnitude=aa_translate_step * 9, prob=0.9,
          direction='vertical'),
     dict(type='Translate', magnitude=aa_translate_step * 9, prob=0.7,
          direction='vertical')],
    [dict(type='AutoContrast', prob=0.9),
     dict(type='Solarize', thr=256 - 256 / 9 * 3, prob=0.8)],
    [dict(type='Equalize', prob=0.8),
     dict(type='Invert', prob=0.1)],
    [dict(type='Translate', magnitude=aa_translate_step * 9, prob=0.7,
          direction='vertical'),
     dict(type='AutoContrast', prob=0.9)],
]

# Random erasing after Normalize, filling the box with the mean numbers
# themselves (main.py:206-214: mean=data_info['stat'][0]; --re 0.25,
# --re_sh 0.4, --re_r1 0.3 at main.py:100-104): the pixel that normalises
# to 0.4914 is 255 * (0.4914 + 0.2470 * 0.4914). ZhongRandomErasing is
# utils/random_erasing.py (uniform aspect ratio in [0.3, 1/0.3]).
erase_fill = [m + s * v for m, s, v in zip(rgb_mean, rgb_std, norm_mean)]
train_pipeline = [
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandomCrop', crop_size=32, padding=4),
    dict(type='HParamsAutoAugment', policies=cifar10_autoaugment_policies,
         hparams=dict(pad_val=128, channel_order='rgb')),
    dict(type='ZhongRandomErasing', erase_prob=0.25, min_area_ratio=0.02,
         max_area_ratio=0.4, min_aspect=0.3, fill=erase_fill),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='PackInputs')]

train_dataloader = dict(
    batch_size=128,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='train',
                 download=False, pipeline=train_pipeline),
    # The original's epoch: RASampler(N, 128, 1, --ra 3, shuffle=True,
    # drop_last=True), aanna0701/SPT_LSA_ViT main.py:221-223: three
    # shuffled passes, the last partial batch dropped (floor(3N/128) = 1171
    # iterations on 50,000 images).
    sampler=dict(type='MultiPassSampler', num_passes=3, shuffle=True),
    drop_last=True,
)
val_dataloader = dict(
    batch_size=256,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='test',
                 download=False, pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False),
)
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
