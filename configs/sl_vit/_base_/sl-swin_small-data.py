# SL-Swin: the small-dataset Swin with Shifted Patch Tokenization (patch
# embedding and pooling between stages) and Locality Self-Attention in its
# windows (tlalign_mm's SLSwin: mmpretrain's SwinTransformer with the modules
# swapped). use_spt / use_lsa give the paper's ablations.
_base_ = ['./swin_small-data.py']
model = dict(backbone=dict(type='SLSwin', use_spt=True, use_lsa=True))
