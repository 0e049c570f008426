# UperNet with a DeiT-S pretrained on ImageNet with TL-Align, on ADE20K.
# mmseg's recipe, vit/vit_deit-s16-ln_mln_upernet_8xb2-160k_ade20k-512x512.py
# (the base below): 512x512 crops, 160k iterations, 8 GPUs x 2 images,
# AdamW lr 6e-5 wd 0.01 (no decay on pos_embed/cls_token), poly schedule
# after 1,500 warm-up iterations, UPerHead on blocks 3/6/9/12 rescaled to
# 1/4, 1/8, 1/16, 1/32 by MultiLevelNeck, auxiliary FCN head (weight 0.4).
#
# The backbone is mmpretrain's VisionTransformer, the pretrained module
# itself (through mmseg's cross-scope registry), with every pretrained
# tensor: final_norm=True keeps the final LayerNorm (mmseg's "-ln" variant).
# It loads strictly (every key, or an error) with tlalign_mm's strict loader
# (not mmengine's Pretrained: strict=True makes a config that loses
# `_scope_` fail loudly); pos_embed is resized from 14x14 to 32x32 by the
# backbone's own load hook.
# Checkpoint: TLALIGN_CKPT (a Runner checkpoint or its
# tools/export_backbone.py export), by default the last checkpoint of
#   tools/train.py configs/tlalign/deit-small_4xb256-tlalign_in1k.py
# CutMix twin:
#   upernet_deit-small-p16-ln-mln_cutmix-in1k-pre_8xb2-160k_ade20k-512x512.py
_base_ = [
    'mmseg::vit/vit_deit-s16-ln_mln_upernet_8xb2-160k_ade20k-512x512.py',
]
custom_imports = dict(
    imports=['mmpretrain.models', 'tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-small_4xb256-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmpretrain.VisionTransformer',
        arch='deit-small',
        patch_size=16,
        img_size=512,
        out_indices=(2, 5, 8, 11),
        out_type='featmap',
        final_norm=True,
        drop_path_rate=0.1,
        interpolate_mode='bicubic',
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm',
            checkpoint=checkpoint_file,
            prefix='backbone.',
            strict=True)))
