# Cascade Mask R-CNN 3x with a Swin-B pretrained on ImageNet with TL-Align,
# on COCO instance segmentation: the Swin authors' recipe (the base below,
# sources there), drop-path 0.3. TLALIGN_CKPT defaults to the paper's
# Swin-B: the 40-epoch TL-Align fine-tune of the official Swin-B,
#   tools/train.py configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py
# (the CutMix twin starts from the official Swin-B itself, SWIN_B_CKPT).
_base_ = [
    './_base_/cascade-mask-rcnn_swin-p4-w7_fpn_4conv1fc-giou_amp-ms-crop-3x_coco.py'  # noqa: E501
]

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.3,
        init_cfg=dict(checkpoint=checkpoint_file,
                      hint='Set TLALIGN_CKPT, or make the file with the '
                      '40-epoch TL-Align fine-tune of the official Swin-B: '
                      'SWIN_B_CKPT=<the official Swin-B, see the config> '
                      'tools/dist_train.sh '
                      'configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py'
                      ' 16')),
    neck=dict(in_channels=[128, 256, 512, 1024]))
