# The CutMix twin of
#   cascade-mask-rcnn_swin-small-p4-w7_tlalign-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py:
# the same Cascade Mask R-CNN recipe, from the CutMix-pretrained Swin-S
# (CUTMIX_CKPT, by default the last checkpoint of tools/train.py
#   configs/tlalign/swin-small_16xb64-cutmix_in1k.py).
_base_ = [
    './cascade-mask-rcnn_swin-small-p4-w7_tlalign-in1k-pre_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'  # noqa: E501
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/swin-small_16xb64-cutmix_in1k/epoch_300.pth}}')))  # noqa: E501
