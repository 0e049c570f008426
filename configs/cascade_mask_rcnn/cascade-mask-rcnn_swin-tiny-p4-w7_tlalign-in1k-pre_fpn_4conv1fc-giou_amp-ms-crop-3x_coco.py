# Cascade Mask R-CNN 3x with a Swin-T pretrained on ImageNet with TL-Align,
# on COCO instance segmentation: the Swin authors' recipe (the base below,
# sources there), drop-path 0.2. Checkpoint: TLALIGN_CKPT (a Runner
# checkpoint or its tools/export_backbone.py export), by default the last
# checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64-tlalign_in1k.py
_base_ = [
    './_base_/cascade-mask-rcnn_swin-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'  # noqa: E501
]

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        arch='tiny',
        drop_path_rate=0.2,
        init_cfg=dict(checkpoint=checkpoint_file)),
    neck=dict(in_channels=[96, 192, 384, 768]))
