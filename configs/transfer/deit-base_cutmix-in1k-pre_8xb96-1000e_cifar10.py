# The CutMix twin of
#   deit-base_tlalign-in1k-pre_8xb96-1000e_cifar10.py:
# the same fine-tuning, from the CutMix-pretrained DeiT-B (CUTMIX_CKPT, by
# default the last checkpoint of tools/train.py
#   configs/tlalign/deit-base_16xb64_in1k_cutmix.py).
_base_ = ['./deit-base_tlalign-in1k-pre_8xb96-1000e_cifar10.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$CUTMIX_CKPT:work_dirs/deit-base_16xb64_in1k_cutmix/epoch_300.pth}}')))  # noqa: E501
