# SL-ViT in the demo: the demo's tiny ViT (vit-tiny-p4_1xb64-cutmix_digits.py: patch
# 4 at 16 px, 16 tokens; same arch, recipe and CutMix) with Shifted Patch
# Tokenization and Locality Self-Attention (tlalign_mm's SLViT, which is
# mmpretrain's VisionTransformer with those modules swapped in). Its TL-Align
# twin is sl-vit-tiny-p4_1xb64-tlalign_digits.py.
_base_ = ['./vit-tiny-p4_1xb64-cutmix_digits.py']

model = dict(backbone=dict(type='SLViT', use_spt=True, use_lsa=True))
