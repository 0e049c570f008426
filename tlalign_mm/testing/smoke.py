# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Try a config before launching it: two training iterations and one
validation step (a test config, such as ``configs/robustness/*``: one test
step) on a tiny synthetic dataset that this tool writes in the config's own
on-disk format, through the set-up of ``tools/train.py``
(:mod:`tlalign_mm.apis.train`; ``tools/test.py``'s for a test config).
``tools/smoke.py CONFIG`` is its command line; :func:`shrink` is the
config change alone, :func:`smoke` the run in this process.

It prints every change it made to make the run small, then the run's own
log, then one ``smoke: ok`` line. What it changes, and nothing else:

* the data: each dataset's ``data_root`` becomes a tiny copy of the layout
  its type reads (:mod:`tlalign_mm.datasets.synthetic`: ImageNet, CIFAR,
  Tiny-ImageNet, Flowers-102, Stanford Cars, ADE20K, COCO, ImageNet-A/R/
  V2/C); a dataset type without a writer keeps the config's data and reads
  its first few samples (``indices``); CIFAR's md5 check is off; the
  data lists are not serialised (``serialize_data``, a gc.collect each);
* the input size: every ``scale``/``scales``/``crop_size`` of the
  pipelines, the backbone's ``img_size`` and the segmentor's input
  ``size`` are divided by one factor, the config's size over ``--size``
  (default 32 px for classification, 64 for segmentation, 128 for
  detection's short side; never enlarged); a Swin pads the stages that
  become smaller than its window (``pad_small_map=True``);
* the loaders: batch size 2 (a test config: its whole tiny set), no
  workers, no pinned memory; the training sampler is the config's, cut to
  its first two batches;
* the run: training stops after 2 iterations and validates once
  (``val_interval``); the schedule (``max_epochs``/``max_iters``,
  ``param_scheduler``) is the config's, checked by
  :func:`tlalign_mm.engine.schedules.check_schedule`; the logger logs every
  iteration; no checkpoint is written (``default_hooks.checkpoint``);
* weights: a ``Pretrained`` ``init_cfg`` whose file exists (or
  ``--checkpoint FILE``, for every ``Pretrained`` ``init_cfg``, else as
  ``load_from``) is kept and loads as training would, strictly, into the
  small model (a ViT's position embedding resized by its own load hook);
  one whose file does not exist is dropped, so the model starts from its
  own initialisation; ``load_from`` likewise;
* detection: at most 16 proposals, 16 sampled RoIs and 16 detections
  per image (2000 / 512 / 100 in the Cascade configs), which bounds the
  RoI heads' cost, and no score threshold (an untrained model's scores
  are all below it, which would leave COCO's metric nothing to score);
* mixed precision (``AmpOptimWrapper``) runs as fp32 without a GPU.

Any ``tools/train.py`` option is passed on (``--amp``, ``--cfg-options``,
...); the user's ``--cfg-options`` apply before the changes above.
"""
import itertools
import os
import os.path as osp
import tempfile
from typing import Dict, List, Optional, Sequence

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import DATA_SAMPLERS
from torch.utils.data import Sampler

from tlalign_mm.apis import test as test_api
from tlalign_mm.apis import train as train_api
from tlalign_mm.apis.cli import ConfigError
from tlalign_mm.checkpoint import install
from tlalign_mm.datasets import check_config_datasets, synthetic
from tlalign_mm.datasets.imagenet_robustness import (
    CORRUPTIONS,
    imagenet_synsets,
    subset_synsets,
)
from tlalign_mm.engine.schedules import check_schedule

ITERS = 2
BATCH = 2
SIZE = {'mmpretrain': 32, 'mmseg': 64, 'mmdet': 128}
SIZE_KEYS = ('scale', 'scales', 'crop_size')
ROIS = 16

#: dataset type -> writer of its tiny copy (root -> None)
WRITERS = {
    'ImageNet': synthetic.write_imagenet,
    'LocalCIFAR10': lambda root: synthetic.write_cifar(root, 'cifar10'),
    'LocalCIFAR100': lambda root: synthetic.write_cifar(root, 'cifar100'),
    'TinyImageNet': synthetic.write_tiny_imagenet,
    'Flowers102': synthetic.write_flowers102,
    'StanfordCars': synthetic.write_stanford_cars,
    'ADE20KDataset': synthetic.write_ade20k,
    'CocoDataset': synthetic.write_coco,
    'ImageNetA': lambda root: synthetic.write_class_folders(
        root, subset_synsets('imagenet_a')[:2]),
    'ImageNetR': lambda root: synthetic.write_class_folders(
        root, subset_synsets('imagenet_r')[:2]),
    'ImageNetV2': lambda root: synthetic.write_class_folders(root, ['0', '1']),
    'ImageNetC': lambda root: synthetic.write_imagenet_c(
        root, CORRUPTIONS, range(1, 6), imagenet_synsets()[:1]),
}


@DATA_SAMPLERS.register_module()
class FirstSamples(Sampler):
    """The first ``num_samples`` indices of each epoch of ``sampler`` (the
    config's own, built as the Runner would)."""

    def __init__(self, dataset, sampler: dict, num_samples: int, seed=None):
        self.dataset = dataset  # batch samplers read it
        self.sampler = DATA_SAMPLERS.build(
            sampler, default_args=dict(dataset=dataset, seed=seed))
        self.num_samples = num_samples

    def __iter__(self):
        return itertools.islice(iter(self.sampler), self.num_samples)

    def __len__(self) -> int:
        return min(self.num_samples, len(self.sampler))

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)


class SmokeHook(Hook):
    """Stops training after ``iters`` iterations; counts the steps run."""
    priority = 'LOWEST'

    def __init__(self, iters: int = ITERS):
        self.iters = iters
        self.steps = dict(train=0, val=0, test=0)
        self.losses, self.metrics = [], {}

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        self.steps['train'] += 1
        self.losses.append(float(outputs['loss'].detach()))
        if self.steps['train'] >= self.iters:
            runner.train_loop.stop_training = True

    def after_val_iter(self, runner, batch_idx, data_batch=None,
                       outputs=None):
        self.steps['val'] += 1

    def after_test_iter(self, runner, batch_idx, data_batch=None,
                        outputs=None):
        self.steps['test'] += 1

    def after_val_epoch(self, runner, metrics=None):
        self.metrics = dict(metrics or {})

    def after_test_epoch(self, runner, metrics=None):
        self.metrics = dict(metrics or {})


def _innermost(dataset: dict) -> dict:
    while isinstance(dataset.get('dataset'), dict):  # dataset wrappers
        dataset = dataset['dataset']
    return dataset


def _kind(dataset: dict) -> str:
    return str(_innermost(dataset).get('type', '')).split('.')[-1]


def is_test_config(cfg: Config) -> bool:
    """A test config (``configs/robustness``) tests on another dataset type
    than it trains on."""
    if cfg.get('test_dataloader') is None:
        return False
    train = cfg.get('train_dataloader')
    return train is None or _kind(train.dataset) != _kind(
        cfg.test_dataloader.dataset)


def divide_size(value, factor: float):
    """An int size (or the ints of a list or tuple) divided by ``factor``,
    rounded, at least 1; anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
        return value
    if isinstance(value, int):
        return max(1, round(value / factor))
    return type(value)(divide_size(v, factor) for v in value)


def shrink_sizes(obj, factor: float) -> None:
    """Divide every ``scale``/``scales``/``crop_size`` in ``obj`` (a
    pipeline) by ``factor``, in place."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in SIZE_KEYS:
                obj[key] = divide_size(value, factor)
            else:
                shrink_sizes(value, factor)
    elif isinstance(obj, list):
        for item in obj:
            shrink_sizes(item, factor)


def native_size(cfg: Config) -> Optional[int]:
    """The config's input size: the backbone's ``img_size`` (classifiers),
    the segmentor's input ``size``, detection's test short side."""
    scope = cfg.get('default_scope', 'mmpretrain')
    if scope == 'mmseg':
        size = cfg.model.data_preprocessor.get('size')
        return max(size) if size else None
    if scope == 'mmdet':
        scales = [t['scale'] for t in _pipeline(cfg.test_dataloader)
                  if t.get('type') == 'Resize']
        return min(scales[0]) if scales else None
    backbone = cfg.model.get('backbone', {})
    size = backbone.get('img_size', backbone.get('pretrain_img_size'))
    if size is None:  # e.g. timm's models: the training crop
        crops = [t.get('scale', t.get('crop_size')) for t in _pipeline(
            cfg.get('train_dataloader')) if t.get('type') in (
                'RandomResizedCrop', 'RandomCrop', 'CenterCrop')]
        size = crops[0] if crops else None
    return size[0] if isinstance(size, (list, tuple)) else size


def _pipeline(loader) -> list:
    return _innermost(loader.dataset).get('pipeline', []) if loader else []


def _pretrained(obj, path: str, changes: List[str],
                checkpoint: Optional[str] = None) -> int:
    """``Pretrained`` init_cfgs (and ``pretrained`` paths) of ``obj``:
    ``checkpoint`` instead of their file where given; kept where the file
    exists, else removed. Returns how many there were."""
    found = 0
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            found += _pretrained(item, f'{path}[{i}]', changes, checkpoint)
        return found
    if not isinstance(obj, dict):
        return found
    for key in list(obj):
        value = obj[key]
        inits = value if isinstance(value, list) else [value]
        pretrained = [i for i in inits if isinstance(i, dict) and i.get(
            'type') == 'Pretrained']
        if key == 'init_cfg' and pretrained:
            found += len(pretrained)
            for init in pretrained:
                if checkpoint is not None:
                    changes.append(f'{path}.init_cfg: Pretrained '
                                   f'{init.get("checkpoint")!r} -> '
                                   f'{checkpoint!r} (--checkpoint), loaded '
                                   'as training would')
                    init['checkpoint'] = checkpoint
                elif _exists(init.get('checkpoint')):
                    changes.append(f'{path}.init_cfg: Pretrained '
                                   f'{init["checkpoint"]!r} kept (the file '
                                   'exists): loaded as training would')
            kept = [i for i in inits if i not in pretrained or
                    _exists(i.get('checkpoint'))]
            for init in pretrained:
                if init not in kept:
                    changes.append(
                        f'{path}.init_cfg: Pretrained '
                        f'{init.get("checkpoint")!r} -> dropped (no such '
                        'file; its own initialisation)')
            obj[key] = (kept if isinstance(value, list) else kept[0]) \
                if kept else None
        elif key == 'pretrained' and isinstance(value, str):
            if not _exists(value):
                obj[key] = None
                changes.append(f'{path}.pretrained: {value!r} -> None (no '
                               'such file)')
        else:
            found += _pretrained(value, f'{path}.{key}', changes, checkpoint)
    return found


def _exists(path) -> bool:
    return isinstance(path, str) and ('://' in path or osp.isfile(path))


def _count_images(root: str) -> int:
    return sum(f.lower().endswith(('.jpg', '.jpeg', '.png'))
               for _, _, files in os.walk(root) for f in files)


def shrink(cfg: Config, data_dir: str, size: Optional[int] = None,
           test: bool = False, checkpoint: Optional[str] = None
           ) -> List[str]:
    """Make ``cfg`` a smoke run in place (see the module docstring), with
    its tiny datasets under ``data_dir`` and ``checkpoint`` (if given) as
    its pretrained weights. Returns the changes, one line each."""
    changes = []
    scope = cfg.get('default_scope', 'mmpretrain')
    native, target = native_size(cfg), size or SIZE.get(scope, 32)
    factor = max(1.0, native / target) if native else 1.0
    loaders = ['test_dataloader'] if test else ['train_dataloader',
                                                'val_dataloader']
    written = {}
    for name in loaders:
        loader = cfg.get(name)
        if loader is None:
            continue
        dataset = _innermost(loader.dataset)
        kind = _kind(dataset)
        if kind in WRITERS:
            root = osp.join(data_dir, kind)
            if root not in written:
                WRITERS[kind](root)
                written[root] = _count_images(root)
            changes.append(f'{name}.dataset ({kind}): data_root '
                           f'{dataset.get("data_root")!r} -> a tiny '
                           f'synthetic copy, {root}')
            dataset.data_root = root
            if kind.startswith('LocalCIFAR'):
                dataset.verify_md5 = False
        else:
            dataset.indices = BATCH if name != 'train_dataloader' else \
                ITERS * BATCH
            changes.append(f'{name}.dataset ({kind}): no synthetic writer; '
                           f'the config\'s data, first {dataset.indices} '
                           'samples')
        # mmengine serialises the data list with a gc.collect() per build
        dataset.serialize_data = False
        if factor > 1:
            shrink_sizes(dataset.get('pipeline', []), factor)
        batch = written.get(dataset.get('data_root'), BATCH) if test \
            else BATCH
        changes.append(f'{name}: batch_size {loader.get("batch_size")} -> '
                       f'{batch}, num_workers {loader.get("num_workers", 0)} '
                       '-> 0')
        loader.update(batch_size=batch, num_workers=0,
                      persistent_workers=False)
        if name == 'train_dataloader' and loader.get('sampler') and \
                loader.sampler.get('type') != 'InfiniteSampler':
            changes.append(f'{name}.sampler: {loader.sampler.type}, cut to '
                           f'its first {ITERS} batches')
            loader.sampler = dict(type='FirstSamples', sampler=loader.sampler,
                                  num_samples=ITERS * batch)
    if factor > 1:
        changes.append(f'input size: every scale/crop_size / {factor:g} '
                       f'({native} -> {round(native / factor)} px)')
        backbone = cfg.model.get('backbone', {})
        for key in ('img_size', 'pretrain_img_size'):
            if key in backbone:
                backbone[key] = divide_size(backbone[key], factor)
        if 'Swin' in str(backbone.get('type')) and not backbone.get(
                'pad_small_map'):
            backbone.pad_small_map = True
            changes.append('model.backbone.pad_small_map -> True (stages '
                           'smaller than the window are padded)')
        if str(backbone.get('type', '')).endswith('TIMMBackbone'):
            backbone.img_size = round(native / factor) if native else None
        preprocessor = cfg.model.get('data_preprocessor') or {}
        if preprocessor.get('size'):
            preprocessor.size = divide_size(preprocessor.size, factor)
    if not test:
        loop = cfg.train_cfg
        interval = 1 if 'max_epochs' in loop or loop.get(
            'by_epoch') else ITERS
        changes.append(f'train_cfg: stops after {ITERS} iterations, '
                       f'val_interval {loop.get("val_interval", 1)} -> '
                       f'{interval} (the schedule is the config\'s)')
        loop.update(val_begin=1, val_interval=interval)
    if not _pretrained(cfg.model, 'model', changes, checkpoint) and \
            checkpoint is not None:
        changes.append(f'load_from: {cfg.get("load_from")!r} -> '
                       f'{checkpoint!r} (--checkpoint), loaded strictly')
        cfg.load_from = checkpoint
    elif cfg.get('load_from') and not _exists(cfg.load_from):
        changes.append(f'load_from: {cfg.load_from!r} -> None (no such '
                       'file)')
        cfg.load_from = None
    elif cfg.get('load_from'):
        changes.append(f'load_from: {cfg.load_from!r} kept (the file '
                       'exists): loaded strictly')
    hooks = cfg.get('default_hooks') or {}
    if hooks.get('checkpoint') is not None:
        hooks.checkpoint = None
        changes.append('default_hooks.checkpoint -> None (nothing saved)')
    if hooks.get('logger') is not None and hooks.logger.get('interval') != 1:
        changes.append(f'default_hooks.logger.interval '
                       f'{hooks.logger.get("interval")} -> 1')
        hooks.logger.interval = 1
    for evaluator in ('val_evaluator', 'test_evaluator'):
        for metric in _as_list(cfg.get(evaluator)):
            if isinstance(metric, dict) and metric.get('ann_file') and \
                    _kind(cfg.val_dataloader.dataset) == 'CocoDataset':
                metric.ann_file = osp.join(
                    data_dir, 'CocoDataset', 'annotations',
                    osp.basename(metric.ann_file))
    changes += _fewer_rois(cfg.model)
    optim = cfg.get('optim_wrapper') or {}
    if optim.get('type') == 'AmpOptimWrapper' and not \
            torch.cuda.is_available():
        optim.type = 'OptimWrapper'
        optim.pop('loss_scale', None)
        changes.append('optim_wrapper: AmpOptimWrapper -> OptimWrapper '
                       '(fp32: no GPU)')
    return changes


def _as_list(value) -> list:
    return value if isinstance(value, (list, tuple)) else [value]


def _fewer_rois(model: dict) -> List[str]:
    """At most :data:`ROIS` proposals and sampled RoIs per image."""
    changes = []
    for stage in ('train_cfg', 'test_cfg'):
        settings = model.get(stage) or {}
        for key in ('rpn_proposal', 'rpn'):
            proposal = settings.get(key) or {}
            if proposal.get('max_per_img', 0) > ROIS:
                changes.append(f'model.{stage}.{key}.max_per_img '
                               f'{proposal.max_per_img} -> {ROIS}')
                proposal.update(nms_pre=ROIS, max_per_img=ROIS)
        for rcnn in _as_list(settings.get('rcnn') or []):
            sampler = rcnn.get('sampler') or {}
            if sampler.get('num', 0) > ROIS:
                changes.append(f'model.{stage}.rcnn.sampler.num '
                               f'{sampler.num} -> {ROIS}')
                sampler.num = ROIS
            if rcnn.get('max_per_img', 0) > ROIS:
                # an untrained model scores below any threshold: keep its
                # best ROIS detections for the evaluator to score
                changes.append(f'model.{stage}.rcnn: max_per_img '
                               f'{rcnn.max_per_img} -> {ROIS}, score_thr '
                               f'{rcnn.get("score_thr")} -> 0')
                rcnn.update(max_per_img=ROIS, score_thr=0.0)
    return changes


def smoke(config: str, argv: Sequence[str] = (), size: Optional[int] = None,
          work_dir: Optional[str] = None, checkpoint: Optional[str] = None
          ) -> Dict:
    """Run the smoke test of ``config`` in this process; ``argv``: more
    ``tools/train.py`` options; ``checkpoint``: the pretrained weights to
    load (default: the config's own, where they exist). The config is
    checked before anything is written (the user's schedule, what the model
    refuses to build). Returns ``changes``, ``steps`` (train, val and test
    steps run), ``losses``, ``metrics`` and the ``work_dir``."""
    if checkpoint is not None and not _exists(checkpoint):
        raise FileNotFoundError(f'--checkpoint {checkpoint}: no such file')
    install()
    cfg = train_api.load_config(config)
    test = is_test_config(cfg)
    # the work dir is made once the config has passed its checks
    pending = work_dir or osp.join(tempfile.gettempdir(), 'smoke_')
    if test:  # tools/test.py's options; no checkpoint
        args = test_api.parse_test_args([config, 'none', '--work-dir',
                                         pending, '--no-pin-memory', *argv])
        cfg = test_api.merge_test_args(cfg, args)
        cfg.load_from = None
    else:
        args = train_api.parse_train_args([
            config, '--work-dir', pending, '--no-pin-memory',
            '--no-persistent-workers', *argv])
        cfg = train_api.merge_train_args(cfg, args)
        try:  # the user's schedule: smoke leaves it as it is
            check_schedule(cfg)
        except ValueError as error:
            raise ConfigError(str(error)) from error
        train_api.check_hooks(cfg)
    train_api.check_model(cfg)
    work_dir = work_dir or tempfile.mkdtemp(prefix='smoke_')
    cfg.work_dir = work_dir
    changes = shrink(cfg, osp.join(work_dir, 'data'), size, test, checkpoint)
    print('\n'.join(['smoke: changed to make the run small:'] +
                    [f'  {c}' for c in changes]), flush=True)
    check_config_datasets(cfg, ['test_dataloader'] if test else
                          ['train_dataloader', 'val_dataloader'])
    if cfg.get('visualizer') is not None:
        # mmdet's and mmseg's runtimes name theirs 'visualizer': an earlier
        # Runner's instance (and work dir) would be reused in this process
        cfg.visualizer.name = f'smoke:{work_dir}'
    hook = SmokeHook()
    runner = train_api.build_runner(cfg)
    runner.register_hook(hook)
    if test:
        runner.test()
    else:
        runner.train()
    return dict(changes=changes, steps=dict(hook.steps), losses=hook.losses,
                metrics=hook.metrics, work_dir=work_dir)
