# TL-Align twin of vit-tiny-p8_1xb64-cutmix_digits-c24.py: the same model,
# recipe and CutMix sampling on the digits in the middle of a 24x24 canvas;
# the target is the aligned class-token label.
_base_ = ['./vit-tiny-p8_1xb64-cutmix_digits-c24.py']

model = dict(type='TLAlignClassifier')
