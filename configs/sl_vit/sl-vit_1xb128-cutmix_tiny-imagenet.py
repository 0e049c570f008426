# SL-ViT (SPT + LSA) from scratch on Tiny-ImageNet, with the
# recipe of "Vision Transformer for Small-Size Datasets" and Mixup/CutMix
# targets. Its TL-Align twin is sl-vit_1xb128-tlalign_tiny-imagenet.py;
# only the training target differs.
_base_ = [
    '../_base_/datasets/tiny-imagenet_bs128_sl.py',
    './_base_/sl-vit_small-data.py',
    './_base_/recipe_small-data.py',
]

# 64 px: patch 8 keeps the token grid of 32 px.
model = dict(
    backbone=dict(img_size=64, patch_size=8),
    head=dict(num_classes=200))
