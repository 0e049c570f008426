# Table 8 ablation: no residual normalisation, Y <- mean_h(A) Y.
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']
model = dict(type='TLAlignClassifier', align_cfg=dict(residual_norm=False))
