# DeiT-Ti version of deit-small_tlalign-in1k-pre_8xb96-1000e_stanford-cars.py
# (same recipe, Stanford Cars); TLALIGN_CKPT defaults to the last checkpoint of
#   tools/train.py configs/tlalign/deit-tiny_4xb256_in1k_tlalign.py
_base_ = ['./deit-small_tlalign-in1k-pre_8xb96-1000e_stanford-cars.py']

model = dict(
    backbone=dict(
        arch='deit-tiny',
        init_cfg=dict(
            checkpoint='{{$TLALIGN_CKPT:work_dirs/deit-tiny_4xb256_in1k_tlalign/epoch_300.pth}}')),  # noqa: E501
    head=dict(in_channels=192))
