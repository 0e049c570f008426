# TL-Align twin of vit-tiny-p4_1xb64-cutmix_digits.py: the same model, recipe and
# CutMix sampling; the target is the aligned class-token label.
_base_ = ['./vit-tiny-p4_1xb64-cutmix_digits.py']

model = dict(type='TLAlignClassifier')
