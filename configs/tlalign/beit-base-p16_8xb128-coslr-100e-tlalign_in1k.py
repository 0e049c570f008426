# TL-Align on mmpretrain's BEiT-B ImageNet fine-tune: labels follow each
# block's attention (relative position bias included); the target is the mean
# label of the patch tokens (what ln2 of their mean feeds the head).
# Everything else is the CutMix twin's.
_base_ = ['./beit-base-p16_8xb128-coslr-100e-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
