# Table 8 ablation: only the last block aligns labels (close to TransMix).
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']
model = dict(type='TLAlignClassifier', align_cfg=dict(align_layers='last'))
