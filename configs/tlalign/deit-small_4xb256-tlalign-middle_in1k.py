# Table 8 ablation: a middle subset of the 12 blocks aligns labels.
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']
model = dict(type='TLAlignClassifier',
             align_cfg=dict(align_layers=[4, 5, 6, 7]))
