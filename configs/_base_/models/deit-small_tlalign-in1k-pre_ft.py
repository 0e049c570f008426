# DeiT-S for fine-tuning (deit_in1k-pre_ft.py) from an ImageNet checkpoint
# pretrained with TL-Align: TLALIGN_CKPT, by default the last checkpoint of
#   tools/train.py configs/tlalign/deit-small_4xb256-tlalign_in1k.py
# (a Runner checkpoint, or its tools/export_backbone.py export).
_base_ = ['./deit_in1k-pre_ft.py']

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-small_4xb256-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(arch='deit-small', init_cfg=dict(checkpoint=checkpoint_file)),
    head=dict(in_channels=384))
