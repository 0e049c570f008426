"""Tiny pretraining checkpoints and tiny versions of the downstream configs.

The downstream e2e tests take a REAL config from ``configs/`` and change
only what CPU time forces, all of it here and named:

* the data root (and the COCO evaluator's annotation file under it);
* the image scale: every ``scale``/``scales``/``crop_size`` in the
  pipelines, the segmentor's ``data_preprocessor.size`` and the backbone's
  ``img_size`` are divided by one factor (``tools/smoke.py``'s
  ``shrink_sizes``);
* the iteration count (2 training iterations), batch size 2, no workers,
  no validation during training;
* mixed precision (AmpOptimWrapper) off where there is no GPU;
* the architecture, to a tiny custom arch of the same family
  (:data:`TINY_VIT`, :data:`TINY_SWIN`) with the channel widths of the
  necks and heads that follow from it (or that are shrunk with it, for
  Cascade Mask R-CNN's 256-channel FPN and RoI heads); a ViT with 4 blocks
  outputs all four (the real config takes 3/6/9/12 of 12).

The pretraining checkpoint is made from the REAL TL-Align ImageNet config
(``configs/tlalign/...``) with the same tiny arch: a ``TLAlignClassifier``
whose weights are initialised and then perturbed (so that no tensor equals
a fresh initialisation by chance), saved the way mmengine's CheckpointHook
saves (``meta`` with the config text, ``state_dict``, ``message_hub``).
"""
import copy
import os.path as osp
from typing import Dict

import torch
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import save_checkpoint, weights_to_cpu

from tests.tool_scripts import load_tool

SMOKE = load_tool('smoke.py')  # its size shrinking: the same as smoke runs'

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

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


def make_pretrain_checkpoint(config: str, path: str, arch: dict,
                             img_size: int, seed: int = 0) -> Dict:
    """Build ``config``'s classifier (a real ImageNet TL-Align config) with
    ``arch`` and ``img_size``, perturb it and save it as a Runner
    checkpoint at ``path``. Returns the saved state dict."""
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(config)
    cfg.model.backbone.arch = copy.deepcopy(arch)
    cfg.model.backbone.img_size = img_size
    cfg.model.head.in_channels = tiny_width(arch)
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    model.init_weights()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn(tensor.shape,
                                              generator=generator))
    hub = MessageHub.get_instance(f'pretrain-{seed}-{osp.basename(path)}')
    hub.update_scalar('train/loss', 1.25)
    state_dict = weights_to_cpu(model.state_dict())
    save_checkpoint(
        dict(meta=dict(epoch=300, iter=1200, cfg=cfg.pretty_text, seed=seed,
                       experiment_name='tiny-pretrain'),
             state_dict=state_dict,
             message_hub=hub.state_dict()), path)
    return state_dict


def _datasets(cfg: Config):
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        loader = cfg.get(name)
        if loader is None:
            continue
        dataset = loader.dataset
        while 'dataset' in dataset:  # wrappers
            dataset = dataset.dataset
        yield name, loader, dataset


def shrink(cfg: Config, data_root: str, factor: int, work_dir: str) -> Config:
    """The data root, image scale and loader overrides (see the module
    docstring); the caller sets the arch and iteration count."""
    cfg = copy.deepcopy(cfg)
    for _, loader, dataset in _datasets(cfg):
        dataset.data_root = data_root
        SMOKE.shrink_sizes(dataset.pipeline, factor)
        loader.batch_size = 2
        loader.num_workers = 0
        loader.persistent_workers = False
    backbone = cfg.model.backbone
    if 'img_size' in backbone:
        backbone.img_size = SMOKE.divide_size(backbone.img_size, factor)
    preprocessor = cfg.model.get('data_preprocessor')
    if preprocessor is not None and preprocessor.get('size') is not None:
        preprocessor.size = SMOKE.divide_size(preprocessor.size, factor)
    cfg.work_dir = work_dir
    cfg.default_hooks.logger.interval = 1
    optim_wrapper = cfg.get('optim_wrapper', {})
    if optim_wrapper.get('type') == 'AmpOptimWrapper' and \
            not torch.cuda.is_available():
        # mmengine's mixed precision needs a GPU: CPU runs check the rest
        # of the recipe in fp32
        optim_wrapper.type = 'OptimWrapper'
        optim_wrapper.pop('loss_scale', None)
    return cfg


def dump(cfg: Config, path: str) -> str:
    cfg.dump(path)
    return path
