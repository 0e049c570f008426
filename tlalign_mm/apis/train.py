# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""What ``tools/train.py`` does, as functions: the command line, merging it
into the config, the checks, building the runner. Follows mmpretrain
1.2.0's ``tools/train.py``; the config's ``default_scope``
(``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``) selects the library.

The order is the contract: :func:`parse_train_args` checks what the
command line names, :func:`merge_train_args` makes the config,
:func:`check_train_config` refuses a config that would fail later (a
missing dataset, a schedule the run is too short for) before anything is
built, and only then :func:`build_runner` builds.
:func:`build_train_runner` is all four, as the tool runs them;
:mod:`tlalign_mm.testing.smoke` and the main job
(:mod:`tlalign_mm.apis.demo`) call the steps themselves.
"""
import argparse
import logging
import os
import os.path as osp
from typing import Optional, Sequence

import torch
from mmengine.config import Config, ConfigDict, DictAction
from mmengine.logging import print_log
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import tlalign_mm  # noqa: F401  registers modules
from tlalign_mm.checkpoint import add_checkpoint_hooks, install
from tlalign_mm.datasets import check_config_datasets
from tlalign_mm.distributed import setup_cpu_distributed
from tlalign_mm.engine.schedules import check_schedule

LAUNCHERS = ['none', 'pytorch', 'slurm', 'mpi']


def train_parser() -> argparse.ArgumentParser:
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
    parser.add_argument('--launcher', default='none', choices=LAUNCHERS,
                        help='job launcher (dist_train.sh: pytorch)')
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help='set by torch.distributed launchers')
    return parser


def parse_train_args(argv: Optional[Sequence[str]] = None):
    """``tools/train.py``'s arguments (``argv``; default ``sys.argv``), with
    a missing ``--resume`` file named now, not after the Runner is built."""
    args = train_parser().parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.resume not in (None, 'auto') and '://' not in args.resume and \
            not osp.isfile(args.resume):
        raise FileNotFoundError(
            f'--resume {args.resume}: no such checkpoint file (--resume '
            'without a path picks the newest intact one of the work dir)')
    return args


def default_work_dir(cfg: Config, args) -> None:
    """work_dir: the command line's, else the config's, else
    ``work_dirs/<config name>``."""
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])


def loader_defaults(cfg: Config, field: str, pin_memory: bool = True
                    ) -> ConfigDict:
    """``cfg[field]`` with pinned memory where it helps (host-to-GPU copies)
    and, for mmpretrain, its ``default_collate`` (mmseg and mmdet batch
    images of several sizes with the Runner's ``pseudo_collate``); the
    config's own settings win."""
    loader = ConfigDict(pin_memory=pin_memory and torch.cuda.is_available())
    if cfg.get('default_scope', None) == 'mmpretrain':
        loader.collate_fn = dict(type='default_collate')
    loader.update(cfg[field])
    if not pin_memory:
        loader.pin_memory = False
    return loader


def merge_train_args(cfg: Config, args) -> Config:
    """Merge ``tools/train.py``'s arguments into ``cfg`` (in place)."""
    if args.no_validate:
        cfg.val_cfg = cfg.val_dataloader = cfg.val_evaluator = None
    cfg.launcher = args.launcher
    default_work_dir(cfg, args)
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
        loader = loader_defaults(cfg, field, not args.no_pin_memory)
        # persistent unless switched off; DataLoader rejects persistent
        # workers when there are none (num_workers=0 from --cfg-options)
        loader.persistent_workers = loader.get('num_workers', 0) > 0 and \
            loader.get('persistent_workers', True) and \
            not args.no_persistent_workers
        cfg[field] = loader

    # strict load_from / --resume (strict_load=False to opt out), atomic
    # checkpoint writes, auto-resume from the newest intact checkpoint
    add_checkpoint_hooks(cfg, training=True)
    return cfg


def check_train_config(cfg: Config) -> None:
    """Everything a training config can be refused for before anything is
    built: a missing dataset (naming the layout it expects), a run shorter
    than its warm-up."""
    check_config_datasets(cfg, ['train_dataloader', 'val_dataloader'])
    check_schedule(cfg)


def build_runner(cfg: Config) -> Runner:
    """``RUNNERS`` if ``runner_type`` is set, else mmengine's Runner; for
    mmdet, as its train.py, fewer repeated dynamo compilations; without
    CUDA, ``--launcher pytorch`` on gloo (:mod:`tlalign_mm.distributed`)."""
    if cfg.get('default_scope', None) == 'mmdet':
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()
    setup_cpu_distributed(cfg)
    if 'runner_type' in cfg:
        return RUNNERS.build(cfg)
    return Runner.from_cfg(cfg)


def build_train_runner(args, format_python_code: bool = True) -> Runner:
    """The runner ``tools/train.py`` trains: every checkpoint mmengine loads
    goes through :func:`tlalign_mm.checkpoint.load`, the config is merged
    and checked, then built. ``format_python_code=False``: mmengine does not
    format the config's text with yapf each time it prints or dumps it (the
    same Python without the layout; 0.15 s of CPU a time)."""
    install()
    cfg = Config.fromfile(args.config, format_python_code=format_python_code)
    cfg = merge_train_args(cfg, args)
    check_train_config(cfg)
    return build_runner(cfg)
