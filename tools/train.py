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


def parse_args():
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='If specify checkpoint path, resume from it, while if not '
        'specify, try to auto resume from the latest checkpoint '
        'in the work directory.')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='enable automatic-mixed-precision training')
    parser.add_argument(
        '--no-validate',
        action='store_true',
        help='whether not to evaluate the checkpoint during training')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='whether to auto scale the learning rate according to the '
        'actual batch size and the original batch size.')
    parser.add_argument(
        '--no-pin-memory',
        action='store_true',
        help='whether to disable the pin_memory option in dataloaders.')
    parser.add_argument(
        '--no-persistent-workers',
        action='store_true',
        help='whether to disable the persistent_workers option in dataloaders.'
    )
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override some settings in the used config, the key-value pair '
        'in xxx=yyy format will be merged into config file. If the value to '
        'be overwritten is a list, it should be like key="[a,b]" or key=a,b '
        'It also allows nested list/tuple values, e.g. key="[(a,b),(c,d)]" '
        'Note that the quotation marks are necessary and that no white space '
        'is allowed.')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    # When using PyTorch version >= 2.0.0, the `torch.distributed.launch`
    # will pass the `--local-rank` parameter to `tools/train.py` instead
    # of `--local_rank`.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)

    return args


def merge_args(cfg, args):
    """Merge CLI arguments to config."""
    if args.no_validate:
        cfg.val_cfg = None
        cfg.val_dataloader = None
        cfg.val_evaluator = None

    cfg.launcher = args.launcher

    # work_dir is determined in this priority: CLI > segment in file > filename
    if args.work_dir is not None:
        # update configs according to CLI args if args.work_dir is not None
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        # use config filename as default work_dir if cfg.work_dir is None
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])

    # enable automatic-mixed-precision training
    if args.amp is True:
        optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
        if optim_wrapper == 'AmpOptimWrapper':
            print_log(
                'AMP training is already enabled in your config.',
                logger='current',
                level=logging.WARNING)
        else:
            assert optim_wrapper == 'OptimWrapper', (
                '`--amp` is only supported when the optimizer wrapper type '
                f'is `OptimWrapper` but got {optim_wrapper}.')
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')

    # resume training
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume

    # enable auto scale learning rate
    if args.auto_scale_lr:
        if cfg.get('auto_scale_lr', None) is None or \
                'base_batch_size' not in cfg.auto_scale_lr:
            raise RuntimeError(
                '`--auto-scale-lr` needs `auto_scale_lr = dict('
                'base_batch_size=...)` in the config (the total batch size '
                'the learning rate was tuned for), but the config has none.')
        cfg.auto_scale_lr.enable = True

    # set dataloader args
    def set_default_dataloader_cfg(cfg, field):
        if cfg.get(field, None) is None:
            return
        dataloader_cfg = ConfigDict(
            # pinned memory only helps host-to-GPU copies
            pin_memory=torch.cuda.is_available())
        if cfg.get('default_scope', None) == 'mmpretrain':
            # mmpretrain's default; mmseg and mmdet batch images of several
            # sizes and need mmengine's pseudo_collate (the Runner default).
            dataloader_cfg.collate_fn = dict(type='default_collate')
        dataloader_cfg.update(cfg[field])
        # DataLoader rejects persistent workers when there are no workers.
        if dataloader_cfg.get('num_workers', 0) > 0:
            dataloader_cfg.setdefault('persistent_workers', True)
        cfg[field] = dataloader_cfg
        if args.no_pin_memory:
            cfg[field]['pin_memory'] = False
        if args.no_persistent_workers:
            cfg[field]['persistent_workers'] = False

    set_default_dataloader_cfg(cfg, 'train_dataloader')
    set_default_dataloader_cfg(cfg, 'val_dataloader')
    set_default_dataloader_cfg(cfg, 'test_dataloader')

    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)

    # strict load_from / --resume (strict_load=False to opt out), atomic
    # checkpoint writes, auto-resume from the newest intact checkpoint
    add_checkpoint_hooks(cfg, training=True)
    return cfg


def build_runner(cfg):
    """Build the runner: ``RUNNERS`` if ``runner_type`` is set, else Runner."""
    if 'runner_type' not in cfg:
        # build the default runner
        return Runner.from_cfg(cfg)
    # build customized runner from the registry
    # if 'runner_type' is set in the cfg
    return RUNNERS.build(cfg)


def main():
    args = parse_args()
    # every checkpoint mmengine loads through tlalign_mm.checkpoint.load,
    # weights only whatever TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD says
    install()

    # load config
    cfg = Config.fromfile(args.config)

    # merge cli arguments to config
    cfg = merge_args(cfg, args)

    if cfg.get('default_scope', None) == 'mmdet':
        # as mmdet's train.py: fewer repeated dynamo compilations
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()

    # a missing dataset fails now, naming the layout it expects
    check_config_datasets(cfg, ['train_dataloader', 'val_dataloader'])
    setup_cpu_distributed(cfg)

    # build the runner from config
    runner = build_runner(cfg)

    # start training
    runner.train()


if __name__ == '__main__':
    run_tool(main)  # a refused file: one line (--debug: the traceback)
