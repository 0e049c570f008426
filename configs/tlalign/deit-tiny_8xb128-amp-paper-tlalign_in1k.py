# TL-Align with the paper's ImageNet recipe at DeiT-Ti size: the official code's
# defaults (_base_/deit_8xb128_in1k_paper.py, sources there) with
# --model deit_tiny_patch16_224 and --tl-align; follow_drop_path=False.
# The paper's Table 1 DeiT-Ti +TL-Align: 73.2 top-1 (the official README;
# baseline 72.2).
_base_ = ['./deit-tiny_8xb128-amp-paper-cutmix_in1k.py']

model = dict(target='tlalign', align_cfg=dict(follow_drop_path=False))
