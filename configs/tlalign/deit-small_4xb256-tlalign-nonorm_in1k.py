# Table 8 ablation: no residual normalisation, Y <- mean_h(A) Y.
_base_ = ['./deit-small_4xb256_in1k_tlalign.py']
model = dict(align_cfg=dict(residual_norm=False))
