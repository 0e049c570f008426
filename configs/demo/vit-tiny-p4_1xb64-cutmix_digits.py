# The demo's CutMix baseline: a tiny ViT (patch 4 at 16 px, 16 tokens) trained
# from scratch on scikit-learn's digits with CutMix. Its TL-Align twin is
# vit-tiny-p4_1xb64-tlalign_digits.py; only the training target differs.
_base_ = [
    '../_base_/datasets/digits_bs64.py',
    '../_base_/default_runtime.py',
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

# AdamW's fused CPU/GPU kernel, and one parameter group per distinct set of
# options instead of one per parameter (MergedParamGroupsConstructor): the
# same algorithm, and the optimizer's share of a training step on one CPU
# thread falls from 12 ms (of 74) to 3.5 ms.
optim_wrapper = dict(
    constructor='MergedParamGroupsConstructor',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05, fused=True),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
    clip_grad=dict(max_norm=5.0),
)
# 3 warm-up epochs, then a cosine to the last epoch. The cosine has no `end`
# or `T_max`: mmengine ends it at train_cfg.max_epochs, so a shorter or
# longer run (`--cfg-options train_cfg.max_epochs=N`) anneals fully instead
# of stopping part-way down a 27-epoch cosine. N must exceed the warm-up
# (mmengine refuses a cosine that begins at its end); tools/run_demo.py
# --epochs N also shortens the warm-up to a tenth of the run.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=True, begin=0, end=3,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=3, eta_min=1e-5),
]
# Validation every 2 epochs gives the learning curves of the main job's
# picture (one validation is about a tenth of an epoch's time).
train_cfg = dict(by_epoch=True, max_epochs=30, val_interval=2)
val_cfg = dict()
test_cfg = dict()

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20),
    # only the final weights: the main job's token-level analysis reads
    # them, and nothing resumes a run of a minute
    checkpoint=dict(type='CheckpointHook', interval=-1, save_last=True))
# Per epoch, how far TL-Align's targets are from the CutMix targets (logs
# nothing when the target is CutMix's).
custom_hooks = [dict(type='LabelDriftHook')]
randomness = dict(seed=0, deterministic=False)
