# Cascade Mask R-CNN 3x with a Swin-T pretrained on ImageNet with TL-Align,
# on COCO instance segmentation: the Swin authors' recipe,
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
# The backbone is the strict-pretrained mmpretrain Swin of
# configs/_base_/models/swin_strict-pretrained.py (window 7 as in
# pretraining; only norm0-2, new by design, may be missing).
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64-tlalign_in1k.py
_base_ = [
    'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',  # noqa: E501
    '../_base_/models/swin_strict-pretrained.py',
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(**_base_.pop('swin_strict_pretrained'), drop_path_rate=0.2),
    neck=dict(in_channels=[96, 192, 384, 768]))
model['backbone']['init_cfg']['checkpoint'] = checkpoint_file

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
