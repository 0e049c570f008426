"""End-to-end: a hostile checkpoint through ``tools/train.py --resume``.

A tiny mmpretrain VisionTransformer is trained for a few iterations on a
generated ImageNet-layout folder (3 classes of 32x32 PNGs); a hostile copy
of its checkpoint is resumed to a larger ``max_iters``. Each step runs the
real script in a subprocess, as a user would. (Train, resume and test of a
real config: ``test_demo_e2e.py``; exact auto-resume:
``tests/engine/test_kill_and_resume.py``.)
"""
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
TRAIN = osp.join(REPO_ROOT, 'tools', 'train.py')

FIRST_ITERS = 4
RESUMED_ITERS = 6

CONFIG = '''
default_scope = 'mmpretrain'
data_root = {data_root!r}

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='VisionTransformer',
        arch=dict(
            embed_dims=32, num_layers=2, num_heads=2,
            feedforward_channels=64),
        img_size=32,
        patch_size=8,
        drop_rate=0.0,
        drop_path_rate=0.0),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=3,
        in_channels=32,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0)))

data_preprocessor = dict(
    num_classes=3, mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]

train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='train',
        pipeline=train_pipeline),
    sampler=dict(type='InfiniteSampler', shuffle=True))
val_dataloader = dict(
    batch_size=6,
    num_workers=0,
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='val',
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=2),
    dict(type='CosineAnnealingLR', by_epoch=False, begin=2, T_max=20),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters={max_iters},
                 val_interval={max_iters})
val_cfg = dict()
test_cfg = dict()

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=1),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=2,
                    save_best='auto'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='VisualizationHook', enable=False))
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))
log_processor = dict(by_epoch=False)
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_level = 'INFO'
load_from = None
resume = False
randomness = dict(seed=0, deterministic=False)
'''


def _write_image_folder(root, num_classes=3, per_class=dict(train=4, val=2)):
    """ImageNet layout: ``root/{train,val}/<class>/<n>.png``."""
    rng = np.random.default_rng(0)
    for split, count in per_class.items():
        for cls in range(num_classes):
            folder = osp.join(root, split, f'class{cls}')
            os.makedirs(folder)
            for i in range(count):
                # classes differ by brightness so a few steps can learn them
                img = rng.integers(0, 80, (32, 32, 3)) + 80 * cls
                Image.fromarray(img.astype(np.uint8)).save(
                    osp.join(folder, f'{i}.png'))


def _write_config(path, data_root, max_iters):
    with open(path, 'w') as f:
        f.write(CONFIG.format(data_root=data_root, max_iters=max_iters))


def _run(*args, timeout=600):
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    proc = subprocess.run([sys.executable, *args],
                          cwd=REPO_ROOT,
                          env=env,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT,
                          text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (
        f'{" ".join(args)} failed with {proc.returncode}:\n'
        f'{proc.stdout[-6000:]}')
    return proc.stdout


@pytest.mark.e2e
def test_a_hostile_checkpoint_resumes_without_running_or_deleting(tmp_path):
    """Holes 1, 4 and 5 through ``tools/train.py --resume``:

    * ``meta['config']``, which mmengine's Runner.resume executes
      (``Config.fromstring``), holds a payload; the file is dropped into a
      work dir, where auto-resume picks it (highest iteration);
    * its message hub names a victim directory as ``best_ckpt`` with
      ``best_score = -1``, so the next validation is a new best and
      mmengine's CheckpointHook (save_best) would ``rmtree`` the victim;
    * ``last_checkpoint`` names ``../first/iter_4.pth``, another run's file.

    Nothing runs, nothing is deleted, the run resumes from its own file.
    (That mmengine still gets meta['config']'s gpu_ids to check:
    ``test_checkpoint_safety.py::test_meta_config_is_parsed_never_executed``.)
    """
    data_root = str(tmp_path / 'data')
    _write_image_folder(data_root)
    config = str(tmp_path / 'tiny_vit_cls.py')
    _write_config(config, data_root, FIRST_ITERS)
    first = str(tmp_path / 'first')
    _run(TRAIN, config, '--work-dir', first)
    ckpt = torch.load(osp.join(first, f'iter_{FIRST_ITERS}.pth'),
                      weights_only=True)
    marker, victim = tmp_path / 'MARK', tmp_path / 'victim'
    victim.mkdir()
    (victim / 'keep.txt').write_text('precious')
    ckpt['meta']['config'] = (f"gpu_ids = [0]\n__import__('os').system("
                              f"'touch {marker}')\n")
    info = ckpt['message_hub']['runtime_info']
    info['best_ckpt'], info['best_score'] = str(victim), -1.0
    work = tmp_path / 'work'
    work.mkdir()
    torch.save(ckpt, work / f'iter_{FIRST_ITERS}.pth')
    (work / 'last_checkpoint').write_text(f'../first/iter_{FIRST_ITERS}.pth')
    _write_config(config, data_root, RESUMED_ITERS)
    out = _run(TRAIN, config, '--work-dir', str(work), '--resume')
    assert f'resumed epoch: 0, iter: {FIRST_ITERS}' in out
    assert 'outside this work dir' in out
    assert not marker.exists()
    assert (victim / 'keep.txt').read_text() == 'precious'
    assert 'best_ckpt' in out and 'dropped' in out
