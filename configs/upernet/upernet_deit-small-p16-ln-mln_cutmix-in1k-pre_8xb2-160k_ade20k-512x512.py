# The CutMix twin of
#   upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py:
# the same UperNet recipe, from the CutMix-pretrained DeiT-S (CUTMIX_CKPT, by
# default the last checkpoint of tools/train.py
#   configs/tlalign/deit-small_4xb256-cutmix_in1k.py).
_base_ = [
    './upernet_deit-small-p16-ln-mln_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py'  # noqa: E501
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/deit-small_4xb256-cutmix_in1k/epoch_300.pth}}')))  # noqa: E501
