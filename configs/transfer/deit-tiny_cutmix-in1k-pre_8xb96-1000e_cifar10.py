# The CutMix twin of
#   deit-tiny_tlalign-in1k-pre_8xb96-1000e_cifar10.py:
# the same fine-tuning, from the CutMix-pretrained DeiT-Ti (CUTMIX_CKPT, by
# default the last checkpoint of tools/train.py
#   configs/tlalign/deit-tiny_4xb256-cutmix_in1k.py).
_base_ = ['./deit-tiny_tlalign-in1k-pre_8xb96-1000e_cifar10.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/deit-tiny_4xb256-cutmix_in1k/epoch_300.pth}}')))  # noqa: E501
