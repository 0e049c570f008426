# UperNet with a Swin-T pretrained on ImageNet with TL-Align, on ADE20K.
# mmseg's recipe,
# swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py
# (the base below): 512x512 crops, 160k iterations, 8 GPUs x 2 images,
# AdamW lr 6e-5 wd 0.01 (no decay on norms and relative position bias
# tables), poly schedule after 1,500 warm-up iterations, UPerHead on the
# four stages, auxiliary FCN head on stage 3 (weight 0.4), drop-path 0.3.
#
# The backbone is the pretrained mmpretrain Swin itself (through the
# cross-scope registry), window 7 as in pretraining, all four stages out.
# It loads strictly (every key, or an error) with tlalign_mm's strict
# loader (not mmengine's Pretrained: strict=True makes a config that loses
# `_scope_` fail loudly), except the output norms of stages 1-3 (norm0-2):
# an ImageNet Swin only has the last one (norm3), so they are new by design
# (allow_missing) and start as identity LayerNorms.
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/swin-tiny_16xb64-tlalign_in1k.py
_base_ = [
    'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',  # noqa: E501
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/swin-tiny_16xb64-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    backbone=dict(
        _delete_=True,  # the recipe's backbone: ours is the pretrained one
        type='mmpretrain.SwinTransformer',
        arch='tiny',
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
