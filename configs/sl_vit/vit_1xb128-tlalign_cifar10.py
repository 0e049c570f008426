# TL-Align twin of vit_1xb128-cutmix_cifar10.py: the same model, recipe and
# Mixup/CutMix sampling (the recording TLMixup/TLCutMix draw exactly what
# mmpretrain's draw); the target is the aligned label of what the head reads.
_base_ = ['./vit_1xb128-cutmix_cifar10.py']

model = dict(type='TLAlignClassifier')
