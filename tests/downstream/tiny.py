"""Tiny pretraining checkpoints, tiny versions of real configs, and the
tools run in this process.

The end-to-end tests take a REAL config from ``configs/`` and change only
what CPU time forces, all of it here and named: the data root; the image
scale (every ``scale``/``scales``/``crop_size``, the backbone's
``img_size`` and the segmentor's input ``size`` divided by one factor,
:func:`tlalign_mm.testing.smoke.shrink_sizes`); batch size 2, no workers; mixed
precision off without a GPU; the architecture, to a tiny custom arch of the
same family (:data:`TINY_VIT`, :data:`TINY_SWIN`) with the neck and head
widths that follow; the caller sets the iterations.

The pretraining checkpoint is made from the REAL TL-Align ImageNet config
with the same tiny arch: a ``TLAlignClassifier`` initialised, then
perturbed (no tensor equals a fresh initialisation by chance), saved as
mmengine's CheckpointHook saves (``meta`` with the config text,
``state_dict``, ``message_hub``).

:func:`run_tool` runs what ``tools/train.py`` or ``tools/test.py`` runs
(:mod:`tlalign_mm.apis`) on a command line, in this process (a Python
start with OpenMMLab's imports costs seconds), and records what the run
did.
"""
import copy
import os.path as osp

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import MessageHub
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import save_checkpoint, weights_to_cpu

from tests.cli import ROOT
from tlalign_mm import apis
from tlalign_mm.testing.smoke import divide_size, shrink_sizes  # as smoke's

TINY_VIT = dict(
    embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)
TINY_SWIN = dict(embed_dims=16, depths=[1, 1, 2, 1], num_heads=[1, 2, 2, 4])


def config_path(*parts: str) -> str:
    return osp.join(ROOT, 'configs', *parts)


def tiny_width(arch: dict) -> int:
    """Channels of the classifier's input for a tiny arch."""
    if 'depths' in arch:
        return arch['embed_dims'] * 2**(len(arch['depths']) - 1)
    return arch['embed_dims']


def make_pretrain_checkpoint(config: str, path: str, backbone=None,
                             width=None) -> torch.nn.Module:
    """Build ``config``'s classifier (a real ImageNet TL-Align config) with
    ``backbone`` changed (default: :data:`TINY_VIT` at 32 px) and a head
    of ``width`` inputs, perturb it and save it as a Runner checkpoint at
    ``path``. Returns the classifier."""
    from mmpretrain.registry import MODELS
    backbone = backbone or dict(arch=TINY_VIT, img_size=32)
    cfg = Config.fromfile(config)
    cfg.model.backbone.update(copy.deepcopy(backbone))
    cfg.model.head.in_channels = width or tiny_width(backbone['arch'])
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    model.init_weights()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn(tensor.shape,
                                              generator=generator))
    hub = MessageHub.get_instance(f'pretrain-{path}')
    hub.update_scalar('train/loss', 1.25)
    save_checkpoint(
        dict(meta=dict(epoch=300, iter=1200, cfg=cfg.pretty_text, seed=0,
                       experiment_name='tiny-pretrain'),
             state_dict=weights_to_cpu(model.state_dict()),
             message_hub=hub.state_dict()), path)
    return model


def shrink(cfg: Config, data_root: str, factor: int, work_dir: str) -> Config:
    """The data root, image scale and loader overrides (see the module
    docstring); the caller sets the arch and iteration count."""
    cfg = copy.deepcopy(cfg)
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        loader = cfg[name]
        dataset = loader.dataset
        while 'dataset' in dataset:  # wrappers
            dataset = dataset.dataset
        dataset.data_root = data_root
        shrink_sizes(dataset.pipeline, factor)
        loader.update(batch_size=2, num_workers=0, persistent_workers=False)
    backbone = cfg.model.backbone
    backbone.img_size = divide_size(backbone.img_size, factor)
    preprocessor = cfg.model.get('data_preprocessor')
    if preprocessor is not None and preprocessor.get('size') is not None:
        preprocessor.size = divide_size(preprocessor.size, factor)
    cfg.work_dir = work_dir
    cfg.visualizer.name = work_dir  # mmseg's and mmdet's share one name
    optim_wrapper = cfg.get('optim_wrapper', {})
    if optim_wrapper.get('type') == 'AmpOptimWrapper' and \
            not torch.cuda.is_available():
        # mmengine's mixed precision needs a GPU: CPU runs check the rest
        # of the recipe in fp32
        optim_wrapper.type = 'OptimWrapper'
        optim_wrapper.pop('loss_scale', None)
    return cfg


def tiny_config(config: str, data_root: str, factor: int,
                work_dir: str) -> Config:
    """The real ``config`` with the tiny arch of its family
    (:data:`TINY_SWIN` for a Swin, else :data:`TINY_VIT`), the head width
    that follows, and :func:`shrink`'s overrides."""
    cfg = Config.fromfile(config)
    swin = 'Swin' in cfg.model.backbone.type
    arch = TINY_SWIN if swin else TINY_VIT
    cfg.model.backbone.arch = dict(arch)
    cfg.model.head.in_channels = tiny_width(arch)
    if swin:  # 32x32 images: later stages are smaller than a window
        cfg.model.backbone.pad_small_map = True
    return shrink(cfg, data_root, factor, work_dir)


class Record(Hook):
    """What a run did: its backbone's tensors when training starts (after
    the Runner's weight init and checkpoint loading), each iteration's
    loss dict, the evaluator's metrics."""
    priority = 'LOWEST'

    def __init__(self):
        self.start, self.logs, self.metrics = None, [], {}

    def before_train(self, runner):
        backbone = getattr(runner.model, 'module', runner.model).backbone
        self.start = {k: v.clone() for k, v in backbone.state_dict().items()}

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        self.logs.append({k: float(v) for k, v in outputs.items()})

    def after_test_epoch(self, runner, metrics=None):
        self.metrics = dict(metrics or {})


def run_tool(name: str, *argv: str) -> Record:
    """What ``python tools/<name> ARGV`` runs (``train.py``, ``test.py``),
    in this process; its run's Record."""
    record, argv = Record(), [str(a) for a in argv]
    if name == 'train.py':
        runner = apis.build_train_runner(apis.parse_train_args(argv))
        runner.register_hook(record)
        runner.train()
    else:
        args = apis.parse_test_args(argv)
        runner = apis.build_test_runner(args)
        runner.register_hook(record)
        apis.run_test(runner, args)
    return record
