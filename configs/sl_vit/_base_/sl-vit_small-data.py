# SL-ViT: the small-dataset ViT with Shifted Patch Tokenization and Locality
# Self-Attention (tlalign_mm's SLViT: mmpretrain's VisionTransformer with the
# modules swapped), initialised as the official ViT (vit_small-data.py).
# use_spt / use_lsa give the paper's ablations.
_base_ = ['./vit_small-data.py']
model = dict(backbone=dict(type='SLViT', use_spt=True, use_lsa=True))
