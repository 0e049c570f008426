# The paper recipe's CutMix twin at DeiT-B size: deit-small_8xb128_in1k_cutmix-paper.py
# (the official code's defaults, sources there) with --model
# deit_base_patch16_224 (models.py: the same recipe for every size,
# drop-path 0.1, no EMA).
_base_ = ['./deit-small_8xb128_in1k_cutmix-paper.py']

model = dict(backbone=dict(arch='deit-base'), head=dict(in_channels=768))
