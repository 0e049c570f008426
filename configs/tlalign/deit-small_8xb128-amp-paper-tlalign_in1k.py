# TL-Align with the paper's DeiT-S ImageNet recipe: the official code
# (Euphoria16/TL-Align at 2a3f35c, main_tla.py defaults,
# train_deit_small_tla.sh with --mixup 0.0 and --tl-align). The recipe and
# its sources are in _base_/deit_8xb128_in1k_paper.py; the CutMix twin,
# deit-small_8xb128-amp-paper-cutmix_in1k.py,
# which differs only in the target. Alignment as the official
# timm/models/vision_transformer.py: every block, residual normalisation,
# drop-path not followed (follow_drop_path=False).
# Should reproduce the paper's Table 1 DeiT-S +TL-Align: 80.6 top-1 (the
# official README; DeiT-S baseline 79.8).
_base_ = ['./deit-small_8xb128-amp-paper-cutmix_in1k.py']

model = dict(target='tlalign', align_cfg=dict(follow_drop_path=False))
