# TL-Align on PVT-Tiny's recipe: labels follow the spatial-reduction
# attention (a reduced key's label is the mean of the tokens it pools) and the
# patch embeddings; the target is the mean label over the last stage's tokens.
_base_ = ['./pvt-tiny_8xb128-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
