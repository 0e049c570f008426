# Cascade Mask R-CNN 3x with a Swin-T pretrained on ImageNet with TL-Align,
# on COCO instance segmentation. mmdet has no Swin Cascade config; this
# follows its Cascade ConvNeXt 3x template (the base below,
# convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py):
# FPN, three cascade stages of 4conv1fc bbox heads with GIoU loss (SyncBN),
# the DETR-style multi-scale + crop augmentation (short edge 480-800), 36
# epochs, 8 GPUs x 2 images, 1,000 warm-up iterations, MultiStepLR at
# epochs 27 and 33. The optimiser is Swin's detection recipe: AdamW lr 1e-4,
# wd 0.05, no decay on norms and relative position bias tables (fp32 here;
# tools/train.py --amp switches to mixed precision). Drop-path 0.2 (T, S),
# 0.3 (B), as the Swin authors' detection configs.
#
# The backbone is the strict-pretrained mmpretrain Swin of
# configs/_base_/models/swin_strict-pretrained.py (window 7 as in
# pretraining; only norm0-2, new by design, may be missing).
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64_in1k_tlalign.py
_base_ = [
    'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py',  # noqa: E501
    '../_base_/models/swin_strict-pretrained.py',
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64_in1k_tlalign/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(**_base_.pop('swin_strict_pretrained'), drop_path_rate=0.2),
    neck=dict(in_channels=[96, 192, 384, 768]))
model['backbone']['init_cfg']['checkpoint'] = checkpoint_file

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(
        custom_keys={
            'absolute_pos_embed': dict(decay_mult=0.),
            'relative_position_bias_table': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }))

# mmseg/mmdet batch images of different sizes (the data preprocessor pads
# them): keep mmengine's pseudo_collate, which tools/train.py and
# tools/test.py would otherwise replace with mmpretrain's default_collate.
train_dataloader = dict(collate_fn=dict(type='pseudo_collate'))
val_dataloader = dict(collate_fn=dict(type='pseudo_collate'))
test_dataloader = dict(collate_fn=dict(type='pseudo_collate'))
