# TL-Align on mmpretrain's Swin-Small recipe: labels follow the windows, shifts,
# padding and patch merging; the target is the mean label over the last
# stage's tokens (what GlobalAveragePooling feeds the head). Everything else
# is the CutMix twin's.
_base_ = ['./swin-small_16xb64-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
