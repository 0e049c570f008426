# Swin-S version of
#   upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py
# (mmseg's swin/swin-small-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# recipe); TLALIGN_CKPT defaults to the last checkpoint of
#   tools/train.py configs/tlalign/swin-small_16xb64-tlalign_in1k.py
_base_ = [
    './upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py'
]

model = dict(
    backbone=dict(
        arch='small',
        init_cfg=dict(
            checkpoint='{{$TLALIGN_CKPT:work_dirs/swin-small_16xb64-tlalign_in1k/epoch_300.pth}}')),  # noqa: E501
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))
