# The CutMix twin of
#   cascade-mask-rcnn_swin-base-p4-w7_tlalign-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py:
# the same recipe, from the official Swin-B (the paper's Swin-B baseline;
# its TL-Align model is a 40-epoch fine-tune of it). SWIN_B_CKPT, by
# default mmpretrain's conversion of SwinTransformer/storage v1.0.0
# swin_base_patch4_window7_224.pth:
#   wget -P checkpoints https://download.openmmlab.com/mmclassification/v0/swin-transformer/convert/swin_base_patch4_window7_224-4670dd19.pth
_base_ = [
    './cascade-mask-rcnn_swin-base-p4-w7_tlalign-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'  # noqa: E501
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$SWIN_B_CKPT:checkpoints/swin_base_patch4_window7_224-4670dd19.pth}}',  # noqa: E501
            hint='Set SWIN_B_CKPT to the official Swin-B in mmpretrain '
            'format: wget -P checkpoints https://download.openmmlab.com/'
            'mmclassification/v0/swin-transformer/convert/'
            'swin_base_patch4_window7_224-4670dd19.pth')))
