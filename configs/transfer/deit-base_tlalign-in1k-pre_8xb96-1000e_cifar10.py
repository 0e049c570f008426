# DeiT-B version of deit-small_tlalign-in1k-pre_8xb96-1000e_cifar10.py
# (same recipe, CIFAR-10); TLALIGN_CKPT defaults to the last checkpoint of
#   tools/train.py configs/tlalign/deit-base_16xb64_in1k_tlalign.py
_base_ = ['./deit-small_tlalign-in1k-pre_8xb96-1000e_cifar10.py']

model = dict(
    backbone=dict(
        arch='deit-base',
        init_cfg=dict(
            checkpoint='{{$TLALIGN_CKPT:work_dirs/deit-base_16xb64_in1k_tlalign/epoch_300.pth}}')),  # noqa: E501
    head=dict(in_channels=768))
