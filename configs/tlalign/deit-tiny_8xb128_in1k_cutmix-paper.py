# The paper recipe's CutMix twin at DeiT-Ti size: deit-small_8xb128_in1k_cutmix-paper.py
# (the official code's defaults, sources there) with --model
# deit_tiny_patch16_224 (models.py: the same recipe for every size,
# drop-path 0.1, no EMA).
_base_ = ['./deit-small_8xb128_in1k_cutmix-paper.py']

model = dict(backbone=dict(arch='deit-tiny'), head=dict(in_channels=192))
