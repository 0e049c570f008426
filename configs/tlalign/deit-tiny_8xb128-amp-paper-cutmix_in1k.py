# The paper recipe's CutMix twin at DeiT-Ti size: the TL-Align paper's DeiT
# ImageNet recipe (_base_/deit_8xb128_in1k_paper.py, every setting with its
# source in the official code there) with the plain area target of the
# token-CutMix box, no alignment. Its TL-Align twin is
# deit-tiny_8xb128-amp-paper-tlalign_in1k.py.
_base_ = ['./_base_/deit_8xb128_in1k_paper.py']

model = dict(backbone=dict(arch='deit-tiny'), head=dict(in_channels=192))
