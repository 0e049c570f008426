# TL-Align on mmpretrain's DeiT-Small recipe. Everything but the training
# target is the CutMix twin's: the recording augmentations draw exactly what
# mmpretrain's Mixup/CutMix draw, and alignment leaves Mixup labels unchanged.
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']

model = dict(
    type='TLAlignClassifier',
    train_cfg=dict(augments=[
        dict(type='TLMixup', alpha=0.8),
        dict(type='TLCutMix', alpha=1.0),
    ]),
)
