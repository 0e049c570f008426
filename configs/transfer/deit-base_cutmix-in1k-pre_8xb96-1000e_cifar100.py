# The CutMix twin of
#   deit-base_tlalign-in1k-pre_8xb96-1000e_cifar100.py:
# the same fine-tuning, from the official DeiT-B (the paper's DeiT-B
# baseline; its TL-Align model is a 40-epoch fine-tune of it). DEIT_B_CKPT,
# by default mmpretrain's conversion of facebookresearch/deit's
# deit_base_patch16_224-b5f2ef4d.pth:
#   wget -P checkpoints https://download.openmmlab.com/mmclassification/v0/deit/deit-base_3rdparty_pt-16xb64_in1k_20211124-6f40c188.pth
_base_ = ['./deit-base_tlalign-in1k-pre_8xb96-1000e_cifar100.py']

model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='{{$DEIT_B_CKPT:checkpoints/deit-base_3rdparty_pt-16xb64_in1k_20211124-6f40c188.pth}}',  # noqa: E501
            hint='Set DEIT_B_CKPT to the official DeiT-B in mmpretrain '
            'format: wget -P checkpoints https://download.openmmlab.com/'
            'mmclassification/v0/deit/deit-base_3rdparty_pt-16xb64_in1k_'
            '20211124-6f40c188.pth')))
