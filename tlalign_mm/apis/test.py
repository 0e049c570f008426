# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""What ``tools/test.py`` does, as functions: the command line, merging it
into the config, the checks, building the runner, testing. Follows
mmpretrain 1.2.0's ``tools/test.py``; the library-specific parts
(``--out``, ``--show-dir``, ``--tta`` defaults) follow mmseg's and mmdet's
own test scripts. The order is :mod:`tlalign_mm.apis.train`'s."""
import argparse
import os
from copy import deepcopy
from typing import Optional, Sequence

import mmengine
from mmengine.config import Config, ConfigDict, DictAction
from mmengine.evaluator import DumpResults
from mmengine.runner import Runner

from tlalign_mm.checkpoint import add_checkpoint_hooks, install
from tlalign_mm.datasets import check_config_datasets

from .train import LAUNCHERS, build_runner, default_work_dir, loader_defaults


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description='Test (and eval) a model (mmpretrain, mmseg or mmdet)')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where the metrics file goes')
    parser.add_argument('--out', help='results file (mmdet: .pkl; mmseg: a '
                        'directory for the predicted maps)')
    parser.add_argument('--out-item', choices=['metrics', 'pred'],
                        help='what --out holds (default: predictions)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value (lists: '
                        'key="[a,b]" or key=a,b; no white space)')
    parser.add_argument('--amp', action='store_true',
                        help='automatic-mixed-precision test')
    parser.add_argument('--show-dir', help='where visualizations go')
    parser.add_argument('--show', action='store_true',
                        help='show predictions in a window')
    parser.add_argument('--interval', type=int, default=1,
                        help='visualize every N samples')
    parser.add_argument('--wait-time', type=float, default=2,
                        help='seconds each window is shown')
    parser.add_argument('--no-pin-memory', action='store_true',
                        help='do not pin host memory for the dataloader')
    parser.add_argument('--tta', action='store_true', help='test-time '
                        "augmentation: the config's tta_model/tta_pipeline, "
                        'else flips (mmpretrain, mmdet)')
    parser.add_argument('--launcher', default='none', choices=LAUNCHERS)
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    return parser


def parse_test_args(argv: Optional[Sequence[str]] = None):
    """``tools/test.py``'s arguments (``argv``; default ``sys.argv``)."""
    parser = _parser()
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.out is None and args.out_item is not None:
        raise ValueError('Please use `--out` argument to specify the '
                         'path of the output file before using `--out-item`.')
    return args


def trigger_visualization_hook(cfg, args):
    """Enable the visualization hook (mmpretrain/mmseg/mmdet flavours)."""
    assert 'visualization' in cfg.default_hooks, \
        'VisualizationHook is not set in the `default_hooks` field of ' \
        'config. Please set `visualization=dict(type="VisualizationHook")`'
    hook = cfg.default_hooks.visualization
    hook.interval = args.interval
    if cfg.get('default_scope', None) not in ('mmseg', 'mmdet'):  # mmpretrain
        hook.update(enable=True, show=args.show, wait_time=args.wait_time,
                    out_dir=args.show_dir)
        return cfg
    hook.draw = True
    if args.show:
        hook.update(show=True, wait_time=args.wait_time)
    if args.show_dir and cfg.default_scope == 'mmseg':
        cfg.visualizer.save_dir = args.show_dir
    elif args.show_dir:
        hook.test_out_dir = args.show_dir
    return cfg


def _flip_tta_pipeline(test_pipeline):
    flip_tta = dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='RandomFlip', prob=1.),
             dict(type='RandomFlip', prob=0.)],
            [test_pipeline[-1]],
        ])
    tta_pipeline = deepcopy(test_pipeline)
    tta_pipeline[-1] = flip_tta
    return tta_pipeline


def setup_tta(cfg):
    """Wrap the model and test pipeline for test-time augmentation."""
    scope = cfg.get('default_scope', None)
    test_data_cfg = cfg.test_dataloader.dataset
    while 'dataset' in test_data_cfg:  # dataset wrappers
        test_data_cfg = test_data_cfg['dataset']
    if 'tta_model' not in cfg:
        if scope == 'mmpretrain':
            cfg.tta_model = dict(type='mmpretrain.AverageClsScoreTTA')
        elif scope == 'mmdet':
            cfg.tta_model = dict(
                type='DetTTAModel',
                tta_cfg=dict(
                    nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))
        else:
            raise RuntimeError(
                f'`--tta` needs `tta_model` and `tta_pipeline` in the config '
                f'for default_scope={scope!r} (see the mmseg configs, e.g. '
                'configs/_base_/datasets/ade20k.py).')
    if 'tta_pipeline' not in cfg:
        if scope in ('mmpretrain', 'mmdet'):
            cfg.tta_pipeline = _flip_tta_pipeline(test_data_cfg.pipeline)
        else:
            raise RuntimeError(
                f'`--tta` needs `tta_pipeline` in the config for '
                f'default_scope={scope!r}.')
    cfg.model = ConfigDict(**cfg.tta_model, module=cfg.model)
    test_data_cfg.pipeline = cfg.tta_pipeline
    return cfg


def merge_test_args(cfg: Config, args) -> Config:
    """Merge ``tools/test.py``'s arguments into ``cfg`` (in place)."""
    scope = cfg.get('default_scope', None)
    if (scope == 'mmdet' and args.out is not None
            and args.out_item in ('pred', None)
            and not args.out.endswith(('.pkl', '.pickle'))):
        raise ValueError('For mmdet configs the `--out` dump file must be a '
                         f'.pkl or .pickle file, but got {args.out!r}.')
    cfg.launcher = args.launcher
    default_work_dir(cfg, args)
    cfg.load_from = args.checkpoint
    if args.amp:
        cfg.test_cfg.fp16 = True
    if args.show or (args.show_dir is not None):
        cfg = trigger_visualization_hook(cfg, args)
    if args.tta:
        cfg = setup_tta(cfg)
    # mmseg: predictions as images
    if (args.out is not None and args.out_item in ('pred', None)
            and scope == 'mmseg'):
        cfg.test_evaluator['output_dir'] = args.out
        cfg.test_evaluator['keep_results'] = True
    cfg.test_dataloader = loader_defaults(cfg, 'test_dataloader',
                                          not args.no_pin_memory)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)

    # the checkpoint must fit the model (strict_load=False to opt out)
    add_checkpoint_hooks(cfg, training=False)
    return cfg


def check_test_config(cfg: Config) -> None:
    """A missing dataset fails before anything is built, naming the layout
    it expects."""
    check_config_datasets(cfg, ['test_dataloader'])


def build_test_runner(args) -> Runner:
    """The runner ``tools/test.py`` tests with (checkpoints through
    :func:`tlalign_mm.checkpoint.load`, loaded strictly), the
    predictions dumped to ``--out`` where asked."""
    install()
    cfg = merge_test_args(Config.fromfile(args.config), args)
    check_test_config(cfg)
    runner = build_runner(cfg)
    if args.out and args.out_item in ('pred', None):
        if cfg.get('default_scope', None) == 'mmdet':
            from mmdet.evaluation import DumpDetResults
            runner.test_evaluator.metrics.append(
                DumpDetResults(out_file_path=args.out))
        elif cfg.get('default_scope', None) != 'mmseg':  # mmseg: output_dir
            runner.test_evaluator.metrics.append(
                DumpResults(out_file_path=args.out))
    return runner


def run_test(runner: Runner, args) -> dict:
    """``runner.test()``; ``--out-item metrics`` dumps the metrics."""
    metrics = runner.test()
    if args.out and args.out_item == 'metrics':
        mmengine.dump(metrics, args.out)
    return metrics
