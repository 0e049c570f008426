# CIFAR-100 with the SL-ViT recipe: everything as cifar10_bs128_sl.py (the
# SPT/LSA code trains CIFAR-100 with the CIFAR-10 AutoAugment policy too).
#
# No download, ever: unpack cifar-100-python.tar.gz so that
#   data/cifar100/cifar-100-python/{train,test,meta}
# exist. A missing file fails at build time with this layout in the message.
_base_ = ['./cifar10_bs128_sl.py']

dataset_type = 'LocalCIFAR100'
data_root = 'data/cifar100'
rgb_mean = [129.304, 124.070, 112.434]
rgb_std = [68.170, 65.392, 70.418]
data_preprocessor = dict(num_classes=100, mean=rgb_mean, std=rgb_std)

train_pipeline = [
    dict(type='RandomCrop', crop_size=32, padding=4),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='AutoAugment',
         policies={{_base_.cifar10_autoaugment_policies}},
         hparams=dict(pad_val=128)),
    dict(type='RandomErasing', erase_prob=0.25, mode='const',
         min_area_ratio=0.02, max_area_ratio=0.4, fill_color=rgb_mean),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root,
                 pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
