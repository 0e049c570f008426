# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""Train a model from an mmpretrain, mmsegmentation or mmdetection config.

The config's ``default_scope`` (``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``)
selects the library; mmengine's :class:`~mmengine.runner.Runner` drives all
three. Follows mmpretrain 1.2.0's ``tools/train.py``.

Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp]
    bash tools/dist_train.sh CONFIG 8 [--amp]

``import tlalign_mm`` registers this package's modules;
:func:`tlalign_mm.checkpoint.install` then routes every checkpoint mmengine
loads (``--resume``, ``load_from``, ``Pretrained`` init, any scheme) through
:func:`tlalign_mm.checkpoint.load`. A refused file ends the run with one
``error:`` line (``--debug`` shows the traceback).

Distributed training without CUDA: with ``--launcher pytorch`` on a machine
where CUDA is unavailable, the process group is initialised here with
``gloo`` (a ``nccl`` backend in ``env_cfg.dist_cfg`` is switched to
``gloo`` with a log line) and DDP wraps the CPU model without
``device_ids``. mmengine's own ``init_dist`` would call
``torch.cuda.set_device`` and fail.
"""
import argparse
import logging
import os
import os.path as osp
import sys

# Make ``tlalign_mm`` importable when run from a checkout without install.
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

import torch  # noqa: E402
from mmengine.config import Config, ConfigDict, DictAction  # noqa: E402
from mmengine.logging import print_log  # noqa: E402
from mmengine.registry import RUNNERS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

import tlalign_mm  # noqa: E402,F401  registers modules
from tlalign_mm.checkpoint import add_checkpoint_hooks, install, run_tool  # noqa: E402,E501
from tlalign_mm.datasets import check_config_datasets  # noqa: E402
from tlalign_mm.distributed import setup_cpu_distributed  # noqa: E402
from tlalign_mm.engine.schedules import check_schedule  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument(
        '--resume', nargs='?', type=str, const='auto',
        help='resume from CKPT; without a path, from the newest intact '
        'checkpoint of the work dir')
    parser.add_argument('--amp', action='store_true',
                        help='automatic-mixed-precision training')
    parser.add_argument('--no-validate', action='store_true',
                        help='do not evaluate checkpoints during training')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the batch size')
    parser.add_argument('--no-pin-memory', action='store_true',
                        help='do not pin host memory for the dataloaders')
    parser.add_argument('--no-persistent-workers', action='store_true',
                        help='end the dataloader workers after every epoch '
                        '(default: kept alive when num_workers > 0)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value (lists: '
                        'key="[a,b]" or key=a,b; no white space)')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'],
                        help='job launcher (dist_train.sh: pytorch)')
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help='set by torch.distributed launchers')
    args = parser.parse_args()
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.resume not in (None, 'auto') and '://' not in args.resume and \
            not osp.isfile(args.resume):
        # now, not after the Runner is built
        raise FileNotFoundError(
            f'--resume {args.resume}: no such checkpoint file (--resume '
            'without a path picks the newest intact one of the work dir)')
    return args


def merge_args(cfg, args):
    """Merge CLI arguments to config."""
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.launcher = args.launcher
    # work_dir: CLI > config > config file name
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    if args.amp:
        optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if optim_wrapper == 'AmpOptimWrapper':
            print_log('AMP training is already enabled in your config.',
                      logger='current', level=logging.WARNING)
        else:
            assert optim_wrapper == 'OptimWrapper', (
                '`--amp` is only supported when the optimizer wrapper type '
                f'is `OptimWrapper` but got {optim_wrapper}.')
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.resume is not None:
        cfg.resume = True
        cfg.load_from = None if args.resume == 'auto' else args.resume

    if args.auto_scale_lr:
        if cfg.get('auto_scale_lr', None) is None or \
                'base_batch_size' not in cfg.auto_scale_lr:
            raise RuntimeError(
                '`--auto-scale-lr` needs `auto_scale_lr = dict('
                'base_batch_size=...)` in the config (the total batch size '
                'the learning rate was tuned for), but the config has none.')
        cfg.auto_scale_lr.enable = True

    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)

    for field in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        if cfg.get(field, None) is None:
            continue
        # pinned memory only helps host-to-GPU copies; default_collate is
        # mmpretrain's default (mmseg and mmdet batch images of several
        # sizes with the Runner's pseudo_collate)
        loader = ConfigDict(pin_memory=torch.cuda.is_available())
        if cfg.get('default_scope', None) == 'mmpretrain':
            loader.collate_fn = dict(type='default_collate')
        loader.update(cfg[field])
        # persistent unless switched off; DataLoader rejects persistent
        # workers when there are none (num_workers=0 from --cfg-options)
        loader.persistent_workers = loader.get('num_workers', 0) > 0 and \
            loader.get('persistent_workers', True) and \
            not args.no_persistent_workers
        if args.no_pin_memory:
            loader.pin_memory = False
        cfg[field] = loader

    # strict load_from / --resume (strict_load=False to opt out), atomic
    # checkpoint writes, auto-resume from the newest intact checkpoint
    add_checkpoint_hooks(cfg, training=True)
    return cfg


def build_runner(cfg):
    """``RUNNERS`` if ``runner_type`` is set, else mmengine's Runner
    (tools/run_demo.py wraps this to add its progress hook)."""
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)


def main():
    args = parse_args()
    # every checkpoint mmengine loads through tlalign_mm.checkpoint.load,
    # weights only whatever TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD says
    install()

    cfg = merge_args(Config.fromfile(args.config), args)

    if cfg.get('default_scope', None) == 'mmdet':
        # as mmdet's train.py: fewer repeated dynamo compilations
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()

    # a missing dataset fails now, naming the layout it expects
    check_config_datasets(cfg, ['train_dataloader', 'val_dataloader'])
    check_schedule(cfg)  # a run shorter than the warm-up fails now, too
    setup_cpu_distributed(cfg)

    runner = build_runner(cfg)
    runner.train()


if __name__ == '__main__':
    run_tool(main)  # a refused file: one line (--debug: the traceback)
