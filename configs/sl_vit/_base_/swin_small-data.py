# The paper's small-dataset Swin as mmpretrain's plain SwinTransformer, with
# the official settings (aanna0701/SPT_LSA_ViT at 54bd796,
# models/create_model.py:33-42 and models/swin.py): embed dim 96, depths
# [2, 6, 4], heads [3, 6, 12], window 4, MLP ratio 2, patch 2 at 32 px
# (16x16 tokens, then 8x8 and 4x4); qkv with bias, nn.LayerNorm's eps 1e-5
# and stochastic depth rising 0 -> 0.1 over the blocks (its SwinTransformer
# defaults, which mmpretrain's are); an absolute position embedding, always
# created and added (swin.py:500-501, 545; mmpretrain's default is none);
# global average pooling and a linear head, label smoothing 0.1.
# Initialisation as the original: no init of its own (swin.py has no
# apply/init_weights), so PyTorch's default Linear/Conv/LayerNorm init, and
# truncated normal 0.02 for the position embedding and the relative
# position bias tables (swin.py:501, 115) -- which mmpretrain's Swin does
# itself; hence init_cfg=None for the classifier and the head. Mixing as main.py's defaults (--mix_prob 0.5,
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
        use_abs_pos_embed=True,
        drop_path_rate=0.1),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(
        type='LinearClsHead',
        num_classes=10,
        in_channels=384,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original'),
        init_cfg=None),
    init_cfg=None,
    train_cfg=dict(
        augments=[
            dict(type='Mixup', alpha=1.0),
            dict(type='CutMix', alpha=1.0),
        ],
        probs=[0.25, 0.25]),  # no mixing in the other half
)
