# UperNet with a Swin-B pretrained on ImageNet with TL-Align, on ADE20K:
# mmseg's recipe,
# swin/swin-base-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# (the base below: the Swin-T recipe at Swin-B size), with the
# strict-pretrained backbone of
# upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py at
# Swin-B size. TLALIGN_CKPT defaults to the paper's Swin-B: the 40-epoch
# TL-Align fine-tune of the official Swin-B,
#   tools/train.py configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py
# (the CutMix twin starts from the official Swin-B itself, SWIN_B_CKPT).
_base_ = [
    'mmseg::swin/swin-base-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',  # noqa: E501
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-base_16xb64-ft40e-tlalign_in1k/epoch_40.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        _delete_=True,  # the recipe's backbone: ours is the pretrained one
        type='mmpretrain.SwinTransformer',
        arch='base',
        img_size=224,
        window_size=7,
        out_indices=(0, 1, 2, 3),
        pad_small_map=True,
        drop_path_rate=0.3,
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm',
            checkpoint=checkpoint_file,
            prefix='backbone.',
            strict=True,
            allow_missing=['norm0.*', 'norm1.*', 'norm2.*'],
            hint='Set TLALIGN_CKPT, or make the file with the 40-epoch '
            'TL-Align fine-tune of the official Swin-B: SWIN_B_CKPT=<the '
            'official Swin-B, see the config> tools/dist_train.sh '
            'configs/tlalign/swin-base_16xb64-ft40e-tlalign_in1k.py 16')))
