# The CutMix twin of
#   upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py:
# the same UperNet recipe, from the CutMix-pretrained Swin-T (CUTMIX_CKPT, by
# default the last checkpoint of tools/train.py
#   configs/tlalign/swin-tiny_16xb64-cutmix_in1k.py).
_base_ = ['./upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/swin-tiny_16xb64-cutmix_in1k/epoch_300.pth}}')))  # noqa: E501
