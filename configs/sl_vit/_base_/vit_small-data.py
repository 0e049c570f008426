# The paper's small-dataset ViT as mmpretrain's plain VisionTransformer:
# dim 192, depth 9, 12 heads of 16 dims, MLP ratio 2, patch 4 at 32 px
# (64 tokens), stochastic depth 0.1; class-token head, label smoothing 0.1,
# Mixup 0.8 / CutMix 1.0 switched per batch. num_classes is set per dataset.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        arch=dict(embed_dims=192, num_layers=9, num_heads=12,
                  feedforward_channels=384),
        img_size=32,
        patch_size=4,
        drop_path_rate=0.1),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=192,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0),
    ]),
)
