# TL-Align on mmpretrain's DeiT-Base recipe. Everything but the training
# target is the CutMix twin's: TLAlignClassifier mixes with the recording
# variants of its Mixup/CutMix (TLMixup/TLCutMix), which draw exactly what
# they draw, and alignment leaves Mixup labels unchanged.
_base_ = ['./deit-base_16xb64-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
