# Table 8 ablation: no residual normalisation, Y <- mean_h(A) Y.
_base_ = ['./deit-small_4xb256-tlalign_in1k.py']
model = dict(align_cfg=dict(residual_norm=False))
