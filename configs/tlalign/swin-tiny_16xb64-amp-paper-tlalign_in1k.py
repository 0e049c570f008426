# TL-Align on Swin's ImageNet recipe for Swin-T, as the paper trains it: the
# CutMix twin swin-tiny_16xb64-amp-paper-cutmix_in1k.py (recipe and sources
# there) with the aligned target of CutMix batches (Mixup batches keep
# theirs) and drop-path not followed (follow_drop_path=False, as the
# official TL-Align code; the paper's Swin code is not public).
# The paper's Table 1 Swin-T +TL-Align: 81.4 top-1 (official README;
# baseline 81.2).
_base_ = ['./swin-tiny_16xb64-amp-paper-cutmix_in1k.py']

model = dict(type='TLAlignClassifier', align_cfg=dict(follow_drop_path=False))
