# The paper's small-dataset Swin as mmpretrain's plain SwinTransformer, with
# the official settings (aanna0701/SPT_LSA_ViT at 54bd796,
# models/create_model.py and models/swin.py): embed dim 96, depths
# [2, 6, 4], heads [3, 6, 12], window 4, MLP ratio 2, patch 2 at 32 px
# (16x16 tokens, then 8x8 and 4x4); qkv with bias, nn.LayerNorm's eps 1e-5
# and stochastic depth rising 0 -> 0.1 over the blocks (its SwinTransformer
# defaults, which mmpretrain's are); global average pooling and a linear
# head, label smoothing 0.1. Mixing as main.py's defaults (--mix_prob 0.5,
# --beta 1.0, --alpha 1.0): half of the batches are mixed, CutMix or Mixup
# with probability 0.5 each. num_classes is set per dataset.
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
    train_cfg=dict(
        augments=[
            dict(type='Mixup', alpha=1.0),
            dict(type='CutMix', alpha=1.0),
        ],
        probs=[0.25, 0.25]),  # no mixing in the other half
)
