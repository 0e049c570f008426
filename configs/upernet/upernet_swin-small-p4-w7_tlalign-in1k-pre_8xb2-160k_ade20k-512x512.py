# UperNet with a Swin-S pretrained on ImageNet with TL-Align, on ADE20K:
# mmseg's recipe,
# swin/swin-small-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# (the base below: the Swin-T recipe with Swin-S's depths), with the
# strict-pretrained backbone of
# upernet_swin-tiny-p4-w7_tlalign-in1k-pre_8xb2-160k_ade20k-512x512.py at
# Swin-S size. TLALIGN_CKPT defaults to the last checkpoint of
#   tools/train.py configs/tlalign/swin-small_16xb64-tlalign_in1k.py
_base_ = [
    'mmseg::swin/swin-small-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',  # noqa: E501
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-small_16xb64-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        _delete_=True,  # the recipe's backbone: ours is the pretrained one
        type='mmpretrain.SwinTransformer',
        arch='small',
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
            allow_missing=['norm0.*', 'norm1.*', 'norm2.*'])))
