# The demo's CutMix baseline: a tiny ViT (patch 4 at 16 px, 16 tokens) trained
# from scratch on scikit-learn's digits with CutMix. Its TL-Align twin is
# vit-tiny-p4_digits_tlalign.py; only the training target differs.
_base_ = [
    '../_base_/datasets/digits_bs64.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['tlalign_mm'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        arch=dict(
            embed_dims=64, num_layers=4, num_heads=4,
            feedforward_channels=128),
        img_size=16,
        patch_size=4,
        drop_path_rate=0.1),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=10,
        in_channels=64,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1,
                  mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[dict(type='CutMix', alpha=1.0)]),
)

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
    clip_grad=dict(max_norm=5.0),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=True, begin=0, end=3,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=3, T_max=27,
         eta_min=1e-5),
]
train_cfg = dict(by_epoch=True, max_epochs=30, val_interval=10)
val_cfg = dict()
test_cfg = dict()

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20),
    checkpoint=dict(type='CheckpointHook', interval=10, max_keep_ckpts=1))
randomness = dict(seed=0, deterministic=False)
