# The CutMix twin of
#   deit-small_tlalign-in1k-pre_8xb96-1000e_cifar100.py:
# the same fine-tuning, from the CutMix-pretrained DeiT-S (CUTMIX_CKPT, by
# default the last checkpoint of tools/train.py
#   configs/tlalign/deit-small_4xb256-cutmix_in1k.py).
_base_ = ['./deit-small_tlalign-in1k-pre_8xb96-1000e_cifar100.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/deit-small_4xb256-cutmix_in1k/epoch_300.pth}}')))  # noqa: E501
