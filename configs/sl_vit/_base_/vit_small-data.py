# The paper's small-dataset ViT: mmpretrain's VisionTransformer (as SLViT
# with SPT and LSA off, which adds the official initialisation), with the
# official model settings (aanna0701/SPT_LSA_ViT at 54bd796,
# models/create_model.py:8-12 and models/vit.py): dim 192, depth 9, 12
# heads of 16 dims, MLP ratio 2, patch 4 at 32 px (64 tokens); qkv without
# bias (to_qkv bias=False, vit.py:61), nn.LayerNorm's eps 1e-5, stochastic
# depth 0.1 in every block (one DropPath(--sd 0.1) for all blocks,
# vit.py:114, not a 0 -> 0.1 ramp); class-token head, label smoothing 0.1
# (the default of LabelSmoothingCrossEntropy, utils/losses.py:11, built
# without arguments at main.py:137: the --smoothing flag of main.py:83 is
# never read). Initialisation as vit.py:14-21, 143-145, 155 (SPTLSAViTInit):
# xavier-normal Linear weights (the head's too) and zero biases, LayerNorm
# 1/0, standard-normal position embedding and class token. Mixing as main.py's
# defaults (--cm, --mu on, --mix_prob 0.5, --beta 1.0, --alpha 1.0): half
# of the batches are mixed, and a mixed batch is CutMix (Beta(1, 1), the
# box's area as lambda) or Mixup (Beta(1, 1)) with probability 0.5 each.
# num_classes is set per dataset.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='SLViT',
        use_spt=False,
        use_lsa=False,
        arch=dict(embed_dims=192, num_layers=9, num_heads=12,
                  feedforward_channels=384),
        img_size=32,
        patch_size=4,
        qkv_bias=False,
        norm_cfg=dict(type='LN', eps=1e-5),
        drop_path_rate=0.1,
        layer_cfgs=dict(drop_path_rate=0.1),  # the same rate in every block
        init_cfg=dict(type='SPTLSAViTInit')),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=192,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original'),
        init_cfg=dict(type='SPTLSAViTInit')),
    init_cfg=None,
    train_cfg=dict(
        augments=[
            dict(type='Mixup', alpha=1.0),
            dict(type='CutMix', alpha=1.0),
        ],
        probs=[0.25, 0.25]),  # no mixing in the other half
)
