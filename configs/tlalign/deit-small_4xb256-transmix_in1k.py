# TransMix (Chen et al., CVPR 2022) on the same model, recipe and sampling as
# the TL-Align twin (deit-small_4xb256-tlalign_in1k.py): the CutMix twin
# with TLAlignClassifier, whose target='transmix' changes only the training
# target of CutMix batches (the mean of the area ratio and the class
# token's last-block attention share); Mixup batches keep their target.
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']

model = dict(type='TLAlignClassifier', target='transmix')
