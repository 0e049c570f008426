# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""What ``tools/test.py`` does, as functions: the command line, merging it
into the config, the checks, building the runner, testing. Follows
mmpretrain 1.2.0's ``tools/test.py``; the library-specific parts
(``--out``, ``--show-dir``, ``--tta`` defaults) follow mmseg's and mmdet's
own test scripts. The order is :mod:`tlalign_mm.apis.train`'s; the
command line is :mod:`.cli`'s."""
import os.path as osp
from copy import deepcopy

import mmengine
from mmengine.config import Config, ConfigDict
from mmengine.evaluator import DumpResults
from mmengine.runner import Runner

from tlalign_mm.checkpoint import add_checkpoint_hooks, install
from tlalign_mm.datasets import check_config_datasets
from tlalign_mm_cli import ConfigError, parse_test_args, test_parser  # noqa: F401

from .train import (
    build_runner,
    check_model,
    default_work_dir,
    load_config,
    loader_defaults,
)


def trigger_visualization_hook(cfg, args):
    """Enable the visualization hook (mmpretrain/mmseg/mmdet flavours)."""
    if 'visualization' not in cfg.default_hooks:
        raise ConfigError(
            'VisualizationHook is not set in the `default_hooks` field of '
            'config. Please set `visualization=dict(type="VisualizationHook")`'
        )
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
            raise ConfigError(
                f'`--tta` needs `tta_model` and `tta_pipeline` in the config '
                f'for default_scope={scope!r} (see the mmseg configs, e.g. '
                'configs/_base_/datasets/ade20k.py).')
    if 'tta_pipeline' not in cfg:
        if scope in ('mmpretrain', 'mmdet'):
            cfg.tta_pipeline = _flip_tta_pipeline(test_data_cfg.pipeline)
        else:
            raise ConfigError(
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
        raise ConfigError('For mmdet configs the `--out` dump file must be '
                          f'a .pkl or .pickle file, but got {args.out!r}.')
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
    try:
        add_checkpoint_hooks(cfg, training=False)
    except TypeError as error:  # strict_load not a bool
        raise ConfigError(str(error)) from error
    return cfg


def check_test_split(cfg: Config) -> None:
    """tools/test.py tests a config's test split: its test_dataloader,
    test_cfg and test_evaluator must be set (before merging the command
    line, which fills the loaders' defaults)."""
    missing = [key for key in ('test_dataloader', 'test_cfg',
                               'test_evaluator') if cfg.get(key) is None]
    if missing:
        raise ConfigError(
            f'{", ".join(missing)}: not set in the config, and tools/test.py '
            'tests the test split (mmengine needs test_dataloader, test_cfg '
            'and test_evaluator). Give them, e.g. test_dataloader = '
            'val_dataloader, test_cfg = dict(), test_evaluator = '
            'val_evaluator, or _base_ a config that has them.')


def check_test_config(cfg: Config) -> None:
    """A config without a test split, a missing dataset (naming the layout
    it expects) and what the model refuses to build fail before anything
    is built or read."""
    check_test_split(cfg)
    check_config_datasets(cfg, ['test_dataloader'])
    check_model(cfg)


def build_test_runner(args) -> Runner:
    """The runner ``tools/test.py`` tests with (checkpoints through
    :func:`tlalign_mm.checkpoint.load`, loaded strictly), the
    predictions dumped to ``--out`` where asked. A checkpoint file that
    does not exist is named before anything is built (it was found when
    the Runner, its work dir and the dataset were built)."""
    if '://' not in args.checkpoint and not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'{args.checkpoint}: no such checkpoint '
                                'file')
    install()
    cfg = load_config(args.config)
    check_test_split(cfg)  # the merge fills the loader: it needs one
    cfg = merge_test_args(cfg, args)  # --cfg-options last: checked again
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
