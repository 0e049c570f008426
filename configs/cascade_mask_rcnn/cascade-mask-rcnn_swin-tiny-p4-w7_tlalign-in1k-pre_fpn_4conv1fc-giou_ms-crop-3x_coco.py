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
# The backbone is mmpretrain's SwinTransformer, the pretrained module itself
# (through mmdet's cross-scope registry), window 7 as in pretraining. It
# loads strictly (every key, or an error) except the output norms of stages
# 1-3 (norm0-2): an ImageNet Swin only has the last one (norm3), so they are
# new by design (allow_missing) and start as identity LayerNorms.
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64_in1k_tlalign.py
_base_ = [
    'mmdet::convnext/cascade-mask-rcnn_convnext-t-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'  # noqa: E501
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64_in1k_tlalign/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.SwinTransformer',
        arch='tiny',
        img_size=224,
        window_size=7,
        drop_path_rate=0.2,
        out_indices=(0, 1, 2, 3),
        pad_small_map=True,
        # the strict loader of tlalign_mm.downstream (not mmengine's):
        # strict=True makes a config that loses `_scope_` fail loudly
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm.downstream',
            checkpoint=checkpoint_file,
            prefix='backbone.',
            strict=True,
            allow_missing=['norm0.*', 'norm1.*', 'norm2.*'])),
    neck=dict(in_channels=[96, 192, 384, 768]))

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
