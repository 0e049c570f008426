# CIFAR-100 with the SL-ViT recipe: everything as cifar10_bs128_sl.py (the
# SPT/LSA code trains CIFAR-100 with the CIFAR-10 AutoAugment policy too).
#
# No download, ever: unpack cifar-100-python.tar.gz so that
#   data/cifar100/cifar-100-python/{train,test,meta}
# exist. A missing file fails at build time with this layout in the message.
_base_ = ['./cifar10_bs128_sl.py']

dataset_type = 'LocalCIFAR100'
data_root = 'data/cifar100'
# SPT_LSA_ViT utils/dataloader.py:20, in 0..255.
norm_mean = (0.5070, 0.4865, 0.4409)
norm_std = (0.2673, 0.2564, 0.2762)
rgb_mean = [255 * m for m in norm_mean]
rgb_std = [255 * s for s in norm_std]
data_preprocessor = dict(num_classes=100, mean=rgb_mean, std=rgb_std)

erase_fill = [m + s * v for m, s, v in zip(rgb_mean, rgb_std, norm_mean)]
train_pipeline = [
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandomCrop', crop_size=32, padding=4),
    dict(type='HParamsAutoAugment',
         policies={{_base_.cifar10_autoaugment_policies}},
         hparams=dict(pad_val=128, channel_order='rgb')),
    dict(type='ZhongRandomErasing', erase_prob=0.25, min_area_ratio=0.02,
         max_area_ratio=0.4, min_aspect=0.3, fill=erase_fill),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root,
                 pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
