# TL-Align on mmpretrain's DeiT-Tiny recipe. Everything but the training
# target is the CutMix twin's: TLAlignClassifier mixes with the recording
# variants of its Mixup/CutMix (TLMixup/TLCutMix), which draw exactly what
# they draw, and alignment leaves Mixup labels unchanged.
_base_ = ['./deit-tiny_4xb256-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
