# Cascade Mask R-CNN 3x with a Swin pretrained on ImageNet, on COCO
# instance segmentation, for every Swin size (no size: each config sets the
# arch, drop-path, FPN widths and checkpoint): the Swin authors' recipe,
# SwinTransformer/Swin-Transformer-Object-Detection at c7b20110,
# configs/swin/cascade_mask_rcnn_swin_tiny_patch4_window7_mstrain_480-800_
# giou_4conv1f_adamw_3x_coco.py (and its _base_ schedule_1x.py). mmdet 3.x
# has no Swin Cascade config; its Cascade ConvNeXt 3x config (the base below,
# convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py)
# is the same detector and data recipe: FPN, three cascade stages of
# 4conv1fc bbox heads with GIoU loss (SyncBN), the DETR-style multi-scale +
# crop augmentation (short edge 480-800), 36 epochs, 8 GPUs x 2 images,
# MultiStepLR at epochs 27 and 33. Set here as the Swin config: AdamW lr
# 1e-4, wd 0.05, no decay on norms and relative position bias tables;
# linear warm-up over 500 iterations from 0.001 x lr (schedule_1x.py; the
# ConvNeXt template has 1,000); mixed precision (the Swin config trains
# with apex fp16, use_fp16=True: AmpOptimWrapper here); drop-path 0.2 (T,
# S), 0.3 (B). No gradient clipping in either.
#
# The backbone is the pretrained mmpretrain Swin itself (through the
# cross-scope registry), window 7 as in pretraining, all four stages out.
# It loads strictly (every key, or an error) with tlalign_mm's strict
# loader (not mmengine's Pretrained: strict=True makes a config that loses
# `_scope_` fail loudly), except the output norms of stages 1-3 (norm0-2):
# an ImageNet Swin only has the last one (norm3), so they are new by design
# (allow_missing) and start as identity LayerNorms.
_base_ = [
    'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',  # noqa: E501
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,  # the recipe's backbone: ours is the pretrained one
        type='mmpretrain.SwinTransformer',
        img_size=224,
        window_size=7,
        out_indices=(0, 1, 2, 3),
        pad_small_map=True,
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm',
            checkpoint=None,
            prefix='backbone.',
            strict=True,
            allow_missing=['norm0.*', 'norm1.*', 'norm2.*'])))

optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0,
         end=500),
    dict(type='MultiStepLR', begin=0, end=36, by_epoch=True,
         milestones=[27, 33], gamma=0.1),
]
