# Swin (mmpretrain SwinTransformer) from scratch on CIFAR-100, with the
# recipe of "Vision Transformer for Small-Size Datasets" and Mixup/CutMix
# targets. Its TL-Align twin is swin_1xb128-tlalign_cifar100.py;
# only the training target differs.
_base_ = [
    '../_base_/datasets/cifar100_bs128_sl.py',
    './_base_/swin_small-data.py',
    './_base_/recipe_small-data.py',
]

model = dict(head=dict(num_classes=100))
