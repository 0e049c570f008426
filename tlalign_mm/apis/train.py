# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""What ``tools/train.py`` does, as functions: merging its command line
(:mod:`.cli`) into the config, the checks, building the runner, training.
Follows mmpretrain 1.2.0's ``tools/train.py``; the config's
``default_scope`` (``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``) selects
the library.

The order is the contract: :func:`parse_train_args` checks what the
command line names, :func:`merge_train_args` makes the config,
:func:`check_train_config` refuses a config that would fail later (what
the model refuses to build, a schedule the run is too short for, mixed
precision without a GPU, a missing dataset) before anything is built or
read, each as one line (:class:`~.cli.ConfigError`), and only then
:func:`build_runner` builds. :func:`build_train_runner` is all four, as
the tool runs them, and :func:`run_train` trains (Ctrl-C saves);
:mod:`tlalign_mm.testing.smoke` and the main job
(:mod:`tlalign_mm.apis.demo`) call the steps themselves.
"""
import copy
import logging
import os.path as osp
import warnings
from contextlib import contextmanager

import torch
from mmengine.config import Config, ConfigDict
from mmengine.dist import get_world_size
from mmengine.logging import MMLogger, print_log
from mmengine.registry import HOOKS, MODELS, RUNNERS
from mmengine.runner import Runner

import tlalign_mm  # noqa: F401  registers modules
from tlalign_mm.checkpoint import (
    add_checkpoint_hooks,
    find_resume_checkpoint,
    install,
)
from tlalign_mm.checkpoint.interrupt import (
    TrainingInterrupted,
    saving_on_signals,
)
from tlalign_mm.datasets import check_config_datasets
from tlalign_mm.distributed import setup_cpu_distributed
from tlalign_mm.engine.schedules import check_schedule

from .cli import (  # noqa: F401  (the command line is tools/train.py's)
    LAUNCHERS,
    REFUSALS,
    ConfigError,
    parse_train_args,
    refusal,
    resume_command,
    train_parser,
)


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


def load_config(path: str, **kwargs) -> Config:
    """``Config.fromfile``; a config that does not parse, whose ``_base_``
    does not merge (a dict over a None without ``_delete_``) or whose
    ``custom_imports`` fail is a :class:`ConfigError` (a missing file stays
    a ``FileNotFoundError``)."""
    try:
        return Config.fromfile(path, **kwargs)
    except (SyntaxError, ImportError, TypeError, KeyError, ValueError,
            AssertionError) as error:
        raise ConfigError(f'{path}: {refusal(error).strip()}') from error


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
        elif optim_wrapper != 'OptimWrapper':
            raise ConfigError(
                '`--amp` is only supported when the optimizer wrapper type '
                f'is `OptimWrapper` but got {optim_wrapper}.')
        else:
            cfg.optim_wrapper.type = 'AmpOptimWrapper'
            cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.resume is not None:
        cfg.resume = True
        cfg.load_from = None if args.resume == 'auto' else args.resume

    if args.auto_scale_lr:
        if cfg.get('auto_scale_lr', None) is None or \
                'base_batch_size' not in cfg.auto_scale_lr:
            raise ConfigError(
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
    # checkpoint writes, auto-resume from the newest intact checkpoint,
    # last.pth every 10 minutes and on Ctrl-C
    try:
        add_checkpoint_hooks(cfg, training=True)
    except TypeError as error:  # strict_load not a bool
        raise ConfigError(str(error)) from error
    return cfg


@contextmanager
def _quiet():
    """Building for a check logs nothing: the Runner builds it again and
    logs then (mmengine's 'current' logger and Python warnings)."""
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            yield
    finally:
        logger.setLevel(level)


def check_model(cfg: Config) -> None:
    """Build ``cfg.model`` as the Runner will, and throw it away: what the
    model refuses at build (an unknown TL-Align option, a target, a
    backbone TL-Align cannot align, an augment without a recording
    variant, an unknown type) is a :class:`ConfigError` now, not after the
    work dir, the logs and the data. On the meta device where the model
    builds there (no memory, no initialisation: 0.2 s for DeiT-B), else on
    the CPU (Swin and PVT call ``.item()`` while they build: 1-2 s)."""
    scope = cfg.get('default_scope', None)
    with _quiet(), MODELS.switch_scope_and_registry(scope) as registry:
        # copies: a build may change its config (mmpretrain's
        # RandomBatchAugment appends the no-mix share to `probs`)
        try:
            with torch.device('meta'):
                registry.build(copy.deepcopy(cfg.model))
            return
        except Exception:  # a refusal, or what the meta device cannot do
            pass
        try:
            registry.build(copy.deepcopy(cfg.model))
        except REFUSALS as error:
            raise ConfigError(f'model: {refusal(error)}') from error


def check_hooks(cfg: Config) -> None:
    """Build ``custom_hooks`` (cheap: hooks act when the Runner calls them)
    so that a wrong setting, e.g. of ``last_checkpoint_hook``, is a
    :class:`ConfigError` now."""
    scope = cfg.get('default_scope', None)
    for i, hook in enumerate(cfg.get('custom_hooks', None) or []):
        if not isinstance(hook, dict):
            continue
        with _quiet(), HOOKS.switch_scope_and_registry(scope) as registry:
            try:
                registry.build(copy.deepcopy(hook))
            except REFUSALS as error:
                raise ConfigError(
                    f'custom_hooks[{i}] ({hook.get("type")}): '
                    f'{refusal(error)}') from error


def check_amp(cfg: Config) -> None:
    """Mixed precision (``--amp``, or a config's ``AmpOptimWrapper``) needs
    a device mmengine's ``AmpOptimWrapper`` runs on."""
    optim_wrapper = cfg.get('optim_wrapper', None) or {}
    if str(optim_wrapper.get('type', '')).split('.')[-1] != \
            'AmpOptimWrapper':
        return
    from mmengine.device import (
        is_cuda_available,
        is_mlu_available,
        is_musa_available,
        is_npu_available,
    )
    if not (is_cuda_available() or is_npu_available() or
            is_mlu_available() or is_musa_available()):
        raise ConfigError(
            'mixed precision (--amp, or the config\'s optim_wrapper type '
            'AmpOptimWrapper) needs a GPU (CUDA, NPU, MLU or MUSA), and '
            'this machine has none. Train without --amp; to try an AMP '
            'config here, tools/smoke.py CONFIG runs it in fp32.')


def check_train_config(cfg: Config) -> None:
    """Everything a training config can be refused for before anything is
    built or read, each a one-line error: a run shorter than its warm-up,
    mixed precision without a GPU, a hook's settings, a missing dataset
    (naming the layout it expects; ``FileNotFoundError``), what the model
    refuses to build."""
    try:
        check_schedule(cfg)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    check_amp(cfg)
    check_hooks(cfg)
    check_config_datasets(cfg, ['train_dataloader', 'val_dataloader'])
    check_model(cfg)


def resolve_resume(cfg: Config) -> None:
    """``--resume`` without a path: the checkpoint it picks is named now
    (:func:`~tlalign_mm.checkpoint.find_resume_checkpoint`); none in the
    work dir: the run starts afresh and says so once (mmengine would also
    log 'Auto resumed from the latest checkpoint None')."""
    if not cfg.get('resume', False) or cfg.get('load_from', None):
        return
    found = find_resume_checkpoint(cfg.work_dir)
    if found is None:
        if not osp.isdir(cfg.work_dir):  # else find_resume_checkpoint said
            print_log(f'{cfg.work_dir} has no checkpoint to resume: '
                      'starting afresh', 'current', logging.WARNING)
        cfg.resume = False
    else:
        cfg.load_from = found


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
    and checked, ``--resume`` resolved, then built. ``format_python_code=
    False``: mmengine does not format the config's text with yapf each time
    it prints or dumps it (the same Python without the layout; 0.15 s of
    CPU a time)."""
    install()
    cfg = load_config(args.config, format_python_code=format_python_code)
    cfg = merge_train_args(cfg, args)
    check_train_config(cfg)
    resolve_resume(cfg)
    return build_runner(cfg)


def run_train(args) -> Runner:
    """``tools/train.py``: build the runner and train. On one process,
    Ctrl-C and SIGTERM save the iteration under way once it has finished
    and end with :class:`~tlalign_mm.checkpoint.interrupt.
    TrainingInterrupted`, which names the command that resumes
    (:mod:`tlalign_mm.checkpoint.interrupt`)."""
    runner = build_train_runner(args)
    with saving_on_signals(enabled=get_world_size() == 1):
        try:
            runner.train()
        except TrainingInterrupted as interrupted:
            interrupted.resume = resume_command(args)
            raise
    return runner
