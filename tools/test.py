# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""Test (and evaluate) a checkpoint with an mmpretrain, mmseg or mmdet config.

The config's ``default_scope`` (``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``)
selects the library; mmengine's :class:`~mmengine.runner.Runner` drives all
three. Follows mmpretrain 1.2.0's ``tools/test.py``; the library-specific
parts (``--out``, ``--show-dir``, ``--tta`` defaults) follow mmseg's and
mmdet's own test scripts.

Examples::

    python tools/test.py CONFIG CHECKPOINT [--out results.pkl]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8

The checkpoint is read by :func:`tlalign_mm.checkpoint.load` and loaded
strictly; a refused file ends the run with one ``error:`` line (``--debug``
shows the traceback). ``--launcher pytorch`` works without
CUDA: see ``tools/train.py``.
"""
import argparse
import os
import os.path as osp
import sys
from copy import deepcopy

# Make ``tlalign_mm`` importable when run from a checkout without install.
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

import mmengine  # noqa: E402
import torch  # noqa: E402
from mmengine.config import Config, ConfigDict, DictAction  # noqa: E402
from mmengine.evaluator import DumpResults  # noqa: E402
from mmengine.registry import RUNNERS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

import tlalign_mm  # noqa: E402,F401  registers modules
from tlalign_mm.checkpoint import add_checkpoint_hooks, install, run_tool  # noqa: E402,E501
from tlalign_mm.datasets import check_config_datasets  # noqa: E402
from tlalign_mm.distributed import setup_cpu_distributed  # noqa: E402


def parse_args():
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
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'])
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
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


def merge_args(cfg, args):
    """Merge CLI arguments to config."""
    cfg.launcher = args.launcher
    # work_dir: CLI > config > config file name
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    cfg.load_from = args.checkpoint
    if args.amp:
        cfg.test_cfg.fp16 = True
    if args.show or (args.show_dir is not None):
        cfg = trigger_visualization_hook(cfg, args)
    if args.tta:
        cfg = setup_tta(cfg)
    # mmseg: predictions as images
    if (args.out is not None and args.out_item in ('pred', None)
            and cfg.get('default_scope', None) == 'mmseg'):
        cfg.test_evaluator['output_dir'] = args.out
        cfg.test_evaluator['keep_results'] = True

    # pinned memory only helps host-to-GPU copies; default_collate is
    # mmpretrain's default (mmseg and mmdet need the Runner's pseudo_collate)
    loader = ConfigDict(pin_memory=torch.cuda.is_available())
    if cfg.get('default_scope', None) == 'mmpretrain':
        loader.collate_fn = dict(type='default_collate')
    loader.update(cfg.test_dataloader)
    if args.no_pin_memory:
        loader.pin_memory = False
    cfg.test_dataloader = loader

    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)

    # the checkpoint must fit the model (strict_load=False to opt out)
    add_checkpoint_hooks(cfg, training=False)
    return cfg


def main():
    args = parse_args()
    # every checkpoint mmengine loads through tlalign_mm.checkpoint.load,
    # weights only whatever TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD says
    install()

    if args.out is None and args.out_item is not None:
        raise ValueError('Please use `--out` argument to specify the '
                         'path of the output file before using `--out-item`.')

    cfg = Config.fromfile(args.config)
    scope = cfg.get('default_scope', None)
    if (scope == 'mmdet' and args.out is not None
            and args.out_item in ('pred', None)
            and not args.out.endswith(('.pkl', '.pickle'))):
        raise ValueError('For mmdet configs the `--out` dump file must be a '
                         f'.pkl or .pickle file, but got {args.out!r}.')

    cfg = merge_args(cfg, args)

    if scope == 'mmdet':
        # as mmdet's test.py: fewer repeated dynamo compilations
        from mmdet.utils import setup_cache_size_limit_of_dynamo
        setup_cache_size_limit_of_dynamo()

    # a missing dataset fails now, naming the layout it expects
    check_config_datasets(cfg, ['test_dataloader'])
    setup_cpu_distributed(cfg)

    runner = RUNNERS.build(cfg) if 'runner_type' in cfg else \
        Runner.from_cfg(cfg)

    # add a `DumpResults` dummy metric to save the predictions
    if args.out and args.out_item in ('pred', None):
        if scope == 'mmdet':
            from mmdet.evaluation import DumpDetResults
            runner.test_evaluator.metrics.append(
                DumpDetResults(out_file_path=args.out))
        elif scope != 'mmseg':  # mmseg writes maps via `output_dir`
            runner.test_evaluator.metrics.append(
                DumpResults(out_file_path=args.out))

    metrics = runner.test()
    if args.out and args.out_item == 'metrics':
        mmengine.dump(metrics, args.out)


if __name__ == '__main__':
    run_tool(main)  # a refused file: one line (--debug: the traceback)
