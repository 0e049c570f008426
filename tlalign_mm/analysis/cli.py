# Copyright (c) tlalign_mm contributors. All rights reserved.
"""The command line every ``tools/analysis`` script shares (the scripts
are thin: this, :mod:`.session` and the analysis itself).

The scripts follow mmpretrain's ``tools/analysis_tools`` conventions: a
``config`` and a ``checkpoint`` (``none`` for a randomly initialised model),
``--work-dir``, ``--cfg-options``, ``--device``, and the data of the config's
own test (or val) dataloader. What is not about the command line (config,
model, data, output files) is :mod:`tlalign_mm.analysis.session`.

Counts must be positive and the dataset non-empty: an analysis of no images
would print RMSE 0.0 or empty statistics as if they were results.
"""
import argparse
import os
import os.path as osp
from typing import List, Optional

from mmengine.config import DictAction

from tlalign_mm.checkpoint import install, one_line_errors
from tlalign_mm_cli import REFUSALS, positive_int, refusal

from .mixed_batches import MIXES
from .session import build_dataloader, build_model, load_config


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
    parser.add_argument('--num-images', type=positive_int, default=None,
                        help='stop after this many images')
    parser.add_argument('--max-batches', type=positive_int, default=None,
                        help='stop after this many batches')
    parser.add_argument('--batch-size', type=positive_int, default=None,
                        help="override the dataloader's batch size")
    parser.add_argument('--mix', choices=MIXES,
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
    parser.add_argument('--debug', action='store_true',
                        help='a refused checkpoint: the traceback, not one '
                        'error line')
    return parser


def model_pairs(models: List[str]) -> List[tuple]:
    """``[config, ckpt, config, ckpt, ...]`` -> ``[(config, ckpt), ...]``."""
    if len(models) % 2:
        raise SystemExit('Give CONFIG CHECKPOINT pairs (`none` for a random '
                         f'init); got {len(models)} paths.')
    return list(zip(models[::2], models[1::2]))


def open_analysis(args, config: Optional[str] = None,
                  checkpoint: Optional[str] = None):
    """The model and its mixed batches as the common options ask, with a
    progress bar over the images.

    Returns:
        tuple: the model (eval) and an iterator of
        :class:`~tlalign_mm.analysis.mixed_batches.MixedBatch`.

    Raises:
        SystemExit: the config's dataset has no images, the model refuses
            the config (an unknown TL-Align option, ...) or the checkpoint
            is refused (one ``error:`` line; ``--debug`` or
            ``TLALIGN_DEBUG=1``: the traceback).
    """
    from mmengine.utils import ProgressBar

    from .mixed_batches import mixed_batches
    install()  # checkpoints through tlalign_mm.checkpoint.load
    if config is None:
        config, checkpoint = args.config, args.checkpoint
    cfg = load_config(config, args.cfg_options)
    with one_line_errors(args.debug):  # a refused checkpoint: one line
        try:
            model = build_model(cfg, checkpoint, args.device, args.seed)
        except REFUSALS as error:  # what the model refuses to build
            if args.debug or os.environ.get('TLALIGN_DEBUG') == '1':
                raise
            raise SystemExit(f'error: {config}: model: {refusal(error)}') \
                from None
    try:
        loader = build_dataloader(cfg, args.split, args.batch_size)
    except ValueError as error:
        raise SystemExit(f'{config}: {error}') from None
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
