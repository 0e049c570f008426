# TL-Align twin of sl-vit-tiny-p4_1xb64-cutmix_digits.py: the same SL-ViT, recipe
# and CutMix sampling; the target is the aligned class-token label, moved by
# SPT's initial labels and LSA's masked attention.
_base_ = ['./sl-vit-tiny-p4_1xb64-cutmix_digits.py']

model = dict(type='TLAlignClassifier')
