# TL-Align on Swin's ImageNet recipe for Swin-S, as the paper trains it: the
# CutMix twin swin-small_16xb64-amp-paper-cutmix_in1k.py (recipe and sources
# there) with the aligned target of CutMix batches (Mixup batches keep
# theirs) and drop-path not followed (follow_drop_path=False, as the
# official TL-Align code; the paper's Swin code is not public).
# The paper's Table 1 Swin-S +TL-Align: 83.4 top-1 (official README;
# baseline 83.0).
_base_ = ['./swin-small_16xb64-amp-paper-cutmix_in1k.py']

model = dict(type='TLAlignClassifier', align_cfg=dict(follow_drop_path=False))
