# DeiT-B for fine-tuning from an ImageNet checkpoint pretrained with TL-Align:
# deit-small_tlalign-in1k-pre_ft.py with the DeiT-B architecture. The backbone
# loads strictly from TLALIGN_CKPT, by default the last checkpoint of
#   tools/train.py configs/tlalign/deit-base_16xb64_in1k_tlalign.py
_base_ = ['./deit-small_tlalign-in1k-pre_ft.py']

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-base_16xb64_in1k_tlalign/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        arch='deit-base', init_cfg=dict(checkpoint=checkpoint_file)),
    head=dict(in_channels=768))
