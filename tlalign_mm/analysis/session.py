"""What every analysis tool sets up: config, model, data, work dir, outputs.

The tools follow mmpretrain's ``tools/analysis_tools`` conventions: a
``config`` and a ``checkpoint`` (``none`` for a randomly initialised model),
``--work-dir``, ``--cfg-options``, ``--device``, and the data of the config's
own test (or val) dataloader, built by :meth:`mmengine.runner.Runner.
build_dataloader`.
"""
import argparse
import csv
import json
import os
import os.path as osp
from typing import Iterable, List, Optional

import torch
import torch.nn as nn
from mmengine.config import Config, DictAction
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope
from mmengine.runner import Runner, load_checkpoint

NO_CHECKPOINT = ('', 'none', 'None', 'random')


def add_common_args(parser: argparse.ArgumentParser,
                    multi_model: bool = False) -> argparse.ArgumentParser:
    """Positional ``config checkpoint`` (or pairs of them) and the options
    every tool shares."""
    if multi_model:
        parser.add_argument(
            'models', nargs='+', metavar='CONFIG CHECKPOINT',
            help='pairs of a config and its checkpoint (`none`: random init)')
    else:
        parser.add_argument('config', help='model config file')
        parser.add_argument(
            'checkpoint', nargs='?', default=None,
            help='checkpoint file; omit or `none` for a randomly initialised '
            'model')
    parser.add_argument('--work-dir', help='where outputs are written '
                        '(default: work_dirs/analysis/<tool>/<config>)')
    parser.add_argument(
        '--split', choices=['test', 'val'], default='test',
        help="the config's dataloader to draw images from")
    parser.add_argument('--num-images', type=int, default=None,
                        help='stop after this many images')
    parser.add_argument('--max-batches', type=int, default=None,
                        help='stop after this many batches')
    parser.add_argument('--batch-size', type=int, default=None,
                        help="override the dataloader's batch size")
    parser.add_argument('--mix', choices=['cutmix', 'mixup', 'none'],
                        default='cutmix',
                        help='how image pairs of a batch are mixed')
    parser.add_argument('--alpha', type=float, default=1.0,
                        help='Beta(alpha, alpha) of the mixing ratio')
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the mixing and of a random init')
    parser.add_argument('--device', default='cpu', help='e.g. cpu, cuda:0')
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction,
        help='override settings of the config, key=value pairs as in '
        'tools/train.py')
    return parser


def model_pairs(models: List[str]) -> List[tuple]:
    """``[config, ckpt, config, ckpt, ...]`` -> ``[(config, ckpt), ...]``."""
    if len(models) % 2:
        raise SystemExit('Give CONFIG CHECKPOINT pairs (`none` for a random '
                         f'init); got {len(models)} paths.')
    return list(zip(models[::2], models[1::2]))


def load_config(path: str, cfg_options: Optional[dict] = None) -> Config:
    cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    # The current logger: warnings only (no weight-init report).
    MMLogger.get_instance(f'tlalign_analysis_{id(cfg)}',
                          log_level='WARNING')
    return cfg


def build_model(cfg: Config, checkpoint: Optional[str] = None,
                device='cpu', seed: int = 0) -> nn.Module:
    """The config's model in eval mode, from ``checkpoint`` (loaded
    strictly: an analysis of a partly loaded model would mean nothing) or,
    with ``None`` / ``'none'``, initialised with ``seed``."""
    from mmpretrain.registry import MODELS
    model_cfg = cfg.model.copy()
    # As mmengine's Runner: a top-level data_preprocessor is the model's.
    if cfg.get('data_preprocessor') is not None:
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    if checkpoint in NO_CHECKPOINT or checkpoint is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model.init_weights()
    else:
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    return model.to(device).eval()


def build_dataloader(cfg: Config, split: str = 'test',
                     batch_size: Optional[int] = None):
    """The config's ``{split}_dataloader`` (falling back to the other of
    test/val), never shuffled: the same images in every run."""
    key = f'{split}_dataloader'
    other = 'val_dataloader' if split == 'test' else 'test_dataloader'
    loader = cfg.get(key) or cfg.get(other)
    if not loader:
        raise ValueError(f'The config has neither {key} nor {other}.')
    loader = loader.copy()
    if batch_size:
        loader['batch_size'] = batch_size
    sampler = dict(loader.get('sampler') or dict(type='DefaultSampler'))
    if 'shuffle' in sampler or sampler.get('type') == 'DefaultSampler':
        sampler['shuffle'] = False
    loader['sampler'] = sampler
    return Runner.build_dataloader(loader)


def open_analysis(args, config: Optional[str] = None,
                  checkpoint: Optional[str] = None):
    """The model and its mixed batches as the common options ask, with a
    progress bar over the images.

    Returns:
        tuple: the model (eval) and an iterator of
        :class:`~tlalign_mm.analysis.mixed_batches.MixedBatch`.
    """
    from mmengine.utils import ProgressBar

    from .mixed_batches import mixed_batches
    if config is None:
        config, checkpoint = args.config, args.checkpoint
    cfg = load_config(config, args.cfg_options)
    model = build_model(cfg, checkpoint, args.device, args.seed)
    loader = build_dataloader(cfg, args.split, args.batch_size)
    total = len(loader.dataset)
    if args.num_images:
        total = min(total, args.num_images)
    if args.max_batches:
        total = min(total, args.max_batches * loader.batch_size)
    batches = mixed_batches(model, loader, args.mix, args.alpha, args.seed,
                            args.num_images, args.max_batches,
                            progress=ProgressBar(total))
    return model, batches


def work_dir_for(args, tool: str) -> str:
    if args.work_dir:
        work_dir = args.work_dir
    else:
        name = osp.splitext(osp.basename(getattr(args, 'config', '') or
                                         ''))[0]
        work_dir = osp.join('work_dirs', 'analysis', tool, name)
    os.makedirs(work_dir, exist_ok=True)
    return work_dir


def write_csv(path: str, rows: Iterable[dict]) -> str:
    rows = list(rows)
    fields = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_json(path: str, data) -> str:
    with open(path, 'w') as f:
        json.dump(data, f, indent=2)
    return path
