# DeiT-S for fine-tuning from an ImageNet checkpoint pretrained with TL-Align
# (DeiT's transfer recipe, facebookresearch/deit issue 45: no stochastic
# depth, label smoothing 0.1, Mixup 0.8 / CutMix 1.0 switched per batch, a
# new head initialised truncated-normal with std 0.02). The dataset config
# sets the head's num_classes.
#
# The backbone loads strictly (every key, or an error:
# deit_strict-pretrained.py) from TLALIGN_CKPT,
# by default the last checkpoint of
#   tools/train.py configs/tlalign/deit-small_4xb256-tlalign_in1k.py
# (a Runner checkpoint, or its tools/export_backbone.py export).
_base_ = ['./deit_strict-pretrained.py']
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

checkpoint_file = '{{$TLALIGN_CKPT:work_dirs/deit-small_4xb256-tlalign_in1k/epoch_300.pth}}'  # noqa: E501
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        **_base_.pop('deit_strict_pretrained'),
        img_size=224,
        drop_path_rate=0.0),  # DeiT's transfer recipe: no stochastic depth
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        in_channels=384,
        # the new head as timm's ViT initialises it (DeiT's --finetune
        # keeps the model's own init for the replaced head), not
        # VisionTransformerClsHead's default zeros
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02),
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0),
    ]),
)
model['backbone']['init_cfg']['checkpoint'] = checkpoint_file
