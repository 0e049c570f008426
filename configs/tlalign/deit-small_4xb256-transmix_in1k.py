# TransMix (Chen et al., CVPR 2022) on the same model, recipe and sampling as
# the TL-Align twin: only the training target of CutMix batches differs
# (the mean of the area ratio and the class token's last-block attention
# share); Mixup batches keep their target.
_base_ = ['./deit-small_4xb256-tlalign_in1k.py']

model = dict(target='transmix')
