"""A tiny training run in the real on-disk formats, for the kill-and-resume
tests: a 2-block ViT on 12 generated 32x32 PNGs (3 classes, ImageNet folder
layout), CutMix, random flips and crops, drop-path, validation, and
``LastCheckpointHook`` every 2 iterations, so random draws come from
Python, numpy and torch, and some checkpoints fall mid-epoch. The Runner's
defaults (its other hooks, visualizer, environment) are left to it."""
import os
import os.path as osp

import numpy as np
from PIL import Image

ITERS_PER_EPOCH = 3  # 12 images, batch 4
EPOCHS = 4
INTERVAL = 2  # LastCheckpointHook

CONFIG = '''
default_scope = 'mmpretrain'
custom_imports = dict(imports=['tlalign_mm', 'tests.engine.kill_during_save'],
                      allow_failed_imports=False)
data_root = {data_root!r}
model = dict(
    type='ImageClassifier',
    backbone=dict(type='VisionTransformer',
                  arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                            feedforward_channels=64),
                  img_size=32, patch_size=8, drop_path_rate=0.2),
    head=dict(type='VisionTransformerClsHead', num_classes=3, in_channels=32),
    train_cfg=dict(augments=[dict(type='CutMix', alpha=1.0)]))
data_preprocessor = dict(num_classes=3)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=32, crop_ratio_range=(0.5, 1.0)),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
train_dataloader = dict(
    batch_size=4, num_workers=0,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='train', pipeline=train_pipeline),
    sampler={sampler})
val_dataloader = dict(
    batch_size=6, num_workers=0,
    dataset=dict(type='CustomDataset', data_root=data_root,
                 data_prefix='val', pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1, ))
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3,
                                    weight_decay=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=3),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=3, T_max=20),
]
train_cfg = {train_cfg}
val_cfg = dict()
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', by_epoch={by_epoch},
                    interval={ckpt_interval}, max_keep_ckpts=1))
custom_hooks = [dict(type='LastCheckpointHook', _scope_='tlalign_mm',
                     interval={interval}, minutes=None)]
log_processor = dict(by_epoch={by_epoch})
randomness = dict(seed=0)
'''


def write_images(root):
    """ImageNet layout: ``root/{train,val}/class<k>/<n>.png``."""
    rng = np.random.default_rng(0)
    for split, count in (('train', 4), ('val', 2)):
        for cls in range(3):
            folder = osp.join(root, split, f'class{cls}')
            os.makedirs(folder)
            for i in range(count):
                img = rng.integers(0, 80, (32, 32, 3)) + 80 * cls
                Image.fromarray(img.astype(np.uint8)).save(
                    osp.join(folder, f'{i}.png'))


def write_config(path, data_root, loop='epoch'):
    """``loop='epoch'``: 4 epochs of 3 iterations, epoch checkpoints,
    validation every 2 epochs; ``'iter'``: 12 iterations from an
    InfiniteSampler, checkpoints every 5, validation every 6."""
    epoch = loop == 'epoch'
    fields = dict(
        sampler=f"dict(type='{'Default' if epoch else 'Infinite'}Sampler', "
        'shuffle=True)', by_epoch=epoch, ckpt_interval=1 if epoch else 5,
        train_cfg=f'dict(by_epoch=True, max_epochs={EPOCHS}, val_interval=2)'
        if epoch else 'dict(type="IterBasedTrainLoop", max_iters='
        f'{EPOCHS * ITERS_PER_EPOCH}, val_interval=6)')
    with open(path, 'w') as f:
        f.write(CONFIG.format(data_root=data_root, interval=INTERVAL,
                              **fields))
