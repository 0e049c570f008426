# DeiT for fine-tuning from an ImageNet classification checkpoint of
# configs/tlalign/ (DeiT's transfer recipe, facebookresearch/deit issue 45:
# no stochastic depth, label smoothing 0.1, Mixup 0.8 / CutMix 1.0 switched
# per batch, a new head initialised truncated-normal with std 0.02). No
# size: deit-{tiny,small,base}_tlalign-in1k-pre_ft.py set the arch, the
# head's width and the checkpoint; the dataset config the head's
# num_classes.
#
# The backbone loads strictly (every key, or an error) from a Runner
# checkpoint or its tools/export_backbone.py export, with tlalign_mm's
# strict loader (not mmengine's Pretrained): strict=True makes a config that
# loses `_scope_` fail loudly.
custom_imports = dict(
    imports=['tlalign_mm', 'tlalign_mm.downstream'],
    allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        patch_size=16,
        img_size=224,
        drop_path_rate=0.0,  # DeiT's transfer recipe: no stochastic depth
        init_cfg=dict(
            type='Pretrained',
            _scope_='tlalign_mm',
            checkpoint=None,
            prefix='backbone.',
            strict=True)),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
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
