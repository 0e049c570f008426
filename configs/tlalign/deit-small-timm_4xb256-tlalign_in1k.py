# TL-Align on timm's DeiT-Small (deit_small_patch16_224 through
# PooledTIMMBackbone). Everything but the training target is the CutMix
# twin's; a checkpoint exports to a plain timm state dict with
#   tools/export_backbone.py CKPT OUT --format timm
_base_ = ['./deit-small-timm_4xb256-cutmix_in1k.py']

model = dict(type='TLAlignClassifier')
