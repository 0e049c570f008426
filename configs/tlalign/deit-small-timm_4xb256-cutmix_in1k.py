# The CutMix twin on timm's DeiT-Small: deit-small_4xb256-cutmix_in1k.py
# (mmpretrain's DeiT-S recipe: 300 epochs, AdamW, Mixup 0.8 / CutMix 1.0
# switched per batch, label smoothing 0.1, no drop-path) with timm's
# deit_small_patch16_224 as the backbone, through mmpretrain's TIMMBackbone.
# PooledTIMMBackbone keeps timm's own pooling (the class token here), so the
# ViT head classifies timm's pre-logits feature. Never downloads weights.
# Compare with deit-small-timm_4xb256-tlalign_in1k.py (only the target
# differs).
_base_ = ['./deit-small_4xb256-cutmix_in1k.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='PooledTIMMBackbone',
        model_name='deit_small_patch16_224',
        global_pool='token',
        pretrained=False),
)
