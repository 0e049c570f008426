# TL-Align on mmpretrain's SwinV2-Tiny recipe: labels follow the cosine
# window attention (with its position bias, shifts and padding) and the
# patch merging before each stage; the target is the mean label over the
# last stage's tokens (what GlobalAveragePooling feeds the head).
# Everything else is the CutMix twin's.
_base_ = ['./swinv2-tiny-w8_16xb64-cutmix_in1k-256px.py']

model = dict(type='TLAlignClassifier')
