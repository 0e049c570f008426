# PVT v1 (Wang et al., ICCV 2021) for ImageNet classification, using mmdet's
# PyramidVisionTransformer through the cross-scope registry, so the weights
# load into mmdet's detectors unchanged. mmdet's PVT has no class token; the
# head classifies the globally pooled last stage.
custom_imports = dict(
    imports=['tlalign_mm', 'mmdet.models'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmdet.PyramidVisionTransformer',
        pretrain_img_size=224,
        embed_dims=64,
        num_layers=[2, 2, 2, 2],
        num_heads=[1, 2, 5, 8],
        mlp_ratios=[8, 8, 4, 4],
        sr_ratios=[8, 4, 2, 1],
        qkv_bias=True,
        drop_path_rate=0.1,
        out_indices=(3, )),
    neck=dict(type='PyramidGlobalAveragePooling'),
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=512,
        init_cfg=None,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        cal_acc=False),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=0.02, bias=0.),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.)
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]),
)
