# CIFAR-10 with the training recipe of "Vision Transformer for Small-Size
# Datasets" (Lee et al. 2021): random crop (padding 4), flip, AutoAugment with
# the CIFAR-10 policy, random erasing 0.25, batches of 128 drawn with repeated
# augmentation x3 (mmpretrain's RepeatAugSampler). CutMix/Mixup are the
# model's batch augments (see configs/sl_vit/_base_/).
#
# No download, ever: unpack cifar-10-python.tar.gz so that
#   data/cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}
# exist (or point data_root elsewhere). A missing file fails at build time
# with this layout in the message (LocalCIFAR10 = mmpretrain's CIFAR10 with
# download=False and that check).
dataset_type = 'LocalCIFAR10'
data_root = 'data/cifar10'
rgb_mean = [125.307, 122.961, 113.8575]
rgb_std = [51.5865, 50.847, 51.255]
data_preprocessor = dict(
    num_classes=10,
    mean=rgb_mean,
    std=rgb_std,
    to_rgb=False,  # mmpretrain's CIFAR arrays are RGB already
)

# AutoAugment's CIFAR-10 policy (Cubuk et al. 2019; the 25 sub-policies of
# DeepVoltaire's CIFAR10Policy, which the SPT/LSA code uses), in mmpretrain's
# transforms. Magnitude index m of 0..9 maps to: shear 0.3*m/9, translate
# (150/331)*m/9 of the size, rotate 30*m/9 degrees, color/contrast/
# sharpness/brightness 0.9*m/9 (= 0.1*m), posterize round(8 - 4*m/9) bits,
# solarize threshold 256 - 256*m/9; signed operations get a random sign.
aa_translate_step = 150 / 331 / 9
cifar10_autoaugment_policies = [
    [dict(type='Invert', prob=0.1),
     dict(type='Contrast', magnitude=0.6, prob=0.2)],
    [dict(type='Rotate', angle=30 / 9 * 2, prob=0.7),
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
    [dict(type='ColorTransform', magnitude=0.3, prob=0.4),
     dict(type='Brightness', magnitude=0.7, prob=0.6)],
    [dict(type='Sharpness', magnitude=0.9, prob=0.3),
     dict(type='Brightness', magnitude=0.9, prob=0.7)],
    [dict(type='Equalize', prob=0.6),
     dict(type='Equalize', prob=0.5)],
    [dict(type='Contrast', magnitude=0.7, prob=0.6),
     dict(type='Sharpness', magnitude=0.5, prob=0.6)],
    [dict(type='ColorTransform', magnitude=0.7, prob=0.7),
     dict(type='Translate', magnitude=aa_translate_step * 8, prob=0.5,
          direction='horizontal')],
    [dict(type='Equalize', prob=0.3),
     dict(type='AutoContrast', prob=0.4)],
    [dict(type='Translate', magnitude=aa_translate_step * 3, prob=0.4,
          direction='vertical'),
     dict(type='Sharpness', magnitude=0.6, prob=0.2)],
    [dict(type='Brightness', magnitude=0.6, prob=0.9),
     dict(type='ColorTransform', magnitude=0.8, prob=0.2)],
    [dict(type='Solarize', thr=256 - 256 / 9 * 2, prob=0.5),
     dict(type='Invert', prob=0.0)],
    [dict(type='Equalize', prob=0.2),
     dict(type='AutoContrast', prob=0.6)],
    [dict(type='Equalize', prob=0.2),
     dict(type='Equalize', prob=0.8)],
    [dict(type='ColorTransform', magnitude=0.9, prob=0.9),
     dict(type='Equalize', prob=0.6)],
    [dict(type='AutoContrast', prob=0.8),
     dict(type='Solarize', thr=256 - 256 / 9 * 8, prob=0.2)],
    [dict(type='Brightness', magnitude=0.3, prob=0.1),
     dict(type='ColorTransform', magnitude=0.0, prob=0.7)],
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

train_pipeline = [
    dict(type='RandomCrop', crop_size=32, padding=4),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='AutoAugment', policies=cifar10_autoaugment_policies,
         hparams=dict(pad_val=128)),
    dict(type='RandomErasing', erase_prob=0.25, mode='const',
         min_area_ratio=0.02, max_area_ratio=0.4, fill_color=rgb_mean),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='PackInputs')]

train_dataloader = dict(
    batch_size=128,
    num_workers=4,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root=data_root, split='train',
                 download=False, pipeline=train_pipeline),
    sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True),
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
