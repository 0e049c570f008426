# DeiT-B for fine-tuning (deit_in1k-pre_ft.py) from an ImageNet checkpoint
# pretrained with TL-Align: TLALIGN_CKPT, by default the paper's DeiT-B, the
# 40-epoch TL-Align fine-tune of the official DeiT-B,
#   tools/train.py configs/tlalign/deit-base_16xb64-ft40e-tlalign_in1k.py
# (the CutMix twins start from the official DeiT-B itself, DEIT_B_CKPT).
_base_ = ['./deit_in1k-pre_ft.py']

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        arch='deit-base',
        init_cfg=dict(
            checkpoint=checkpoint_file,
            hint='Set TLALIGN_CKPT, or make the file with the 40-epoch '
            'TL-Align fine-tune of the official DeiT-B: DEIT_B_CKPT=<the '
            'official DeiT-B, see the config> tools/dist_train.sh '
            'configs/tlalign/deit-base_16xb64-ft40e-tlalign_in1k.py 16')),
    head=dict(in_channels=768))
