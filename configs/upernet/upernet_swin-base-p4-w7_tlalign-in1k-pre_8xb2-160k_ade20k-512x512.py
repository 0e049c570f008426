# Swin-B version of
#   upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py
# (mmseg's swin/swin-base-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# recipe). TLALIGN_CKPT defaults to the paper's
# Swin-B: the 40-epoch TL-Align fine-tune of the official Swin-B,
#   tools/train.py configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py
# (the CutMix twin starts from the official Swin-B itself, SWIN_B_CKPT).
_base_ = [
    './upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py'
]

model = dict(
    backbone=dict(
        arch='base',
        init_cfg=dict(
            checkpoint='{{$TLALIGN_CKPT:work_dirs/swin-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth}}',  # noqa: E501
            hint='Set TLALIGN_CKPT, or make the file with the 40-epoch '
            'TL-Align fine-tune of the official Swin-B: SWIN_B_CKPT=<the '
            'official Swin-B, see the config> tools/dist_train.sh '
            'configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py 16')),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
