# The paper's small-dataset Swin as mmpretrain's plain SwinTransformer:
# embed dim 96, depths [2, 6, 4], heads [3, 6, 12], window 4, MLP ratio 2,
# patch 2 at 32 px (16x16 tokens, then 8x8 and 4x4), stochastic depth 0.1;
# global average pooling and a linear head, label smoothing 0.1, Mixup 0.8 /
# CutMix 1.0 switched per batch. num_classes is set per dataset.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='SwinTransformer',
        arch=dict(embed_dims=96, depths=[2, 6, 4], num_heads=[3, 6, 12]),
        img_size=32,
        patch_size=2,
        window_size=4,
        stage_cfgs=dict(block_cfgs=dict(ffn_ratio=2.)),
        out_indices=(2, ),
        drop_path_rate=0.1),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(
        type='LinearClsHead',
        num_classes=10,
        in_channels=384,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02, bias=0.),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0),
    ]),
)
