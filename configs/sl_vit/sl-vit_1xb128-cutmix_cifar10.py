# SL-ViT (SPT + LSA) from scratch on CIFAR-10, with the
# recipe of "Vision Transformer for Small-Size Datasets" and Mixup/CutMix
# targets. Its TL-Align twin is sl-vit_1xb128-tlalign_cifar10.py;
# only the training target differs.
_base_ = [
    '../_base_/datasets/cifar10_bs128_sl.py',
    './_base_/sl-vit_small-data.py',
    './_base_/recipe_small-data.py',
]

model = dict(head=dict(num_classes=10))
