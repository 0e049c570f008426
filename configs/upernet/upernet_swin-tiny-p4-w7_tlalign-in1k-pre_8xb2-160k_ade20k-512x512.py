# UperNet with a Swin-T pretrained on ImageNet with TL-Align, on ADE20K.
# mmseg's recipe,
# swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# (the base below): 512x512 crops, 160k iterations, 8 GPUs x 2 images,
# AdamW lr 6e-5 wd 0.01 (no decay on norms and relative position bias
# tables), poly schedule after 1,500 warm-up iterations, UPerHead on the
# four stages, auxiliary FCN head on stage 3 (weight 0.4), drop-path 0.3.
#
# The backbone is the strict-pretrained mmpretrain Swin of
# configs/_base_/models/swin_strict-pretrained.py (window 7 as in
# pretraining; only norm0-2, new by design, may be missing).
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64-tlalign_in1k.py
_base_ = [
    'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',  # noqa: E501
    '../_base_/models/swin_strict-pretrained.py',
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(**_base_.pop('swin_strict_pretrained'), drop_path_rate=0.3),
    decode_head=dict(in_channels=[96, 192, 384, 768], num_classes=150),
    auxiliary_head=dict(in_channels=384, num_classes=150))
model['backbone']['init_cfg']['checkpoint'] = checkpoint_file
