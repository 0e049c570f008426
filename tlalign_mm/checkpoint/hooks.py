"""The hooks: :class:`CheckpointSafetyHook` (strict loads, atomic writes,
plain checkpoints; ``tools/train.py`` and ``tools/test.py`` add it) and
:class:`LastCheckpointHook` (``last.pth`` every N iterations or minutes and
on Ctrl-C, exact resume; ``tools/train.py`` adds it)."""
import os.path as osp
import time
from numbers import Real
from typing import Optional

from mmengine.dist import get_rank, is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop

from tlalign_mm.registry import HOOKS, SCOPE

from . import mmengine_adapter as adapter
from .files import remove_partial_files
from .interrupt import TrainingInterrupted, pending
from .plain import capture_rng, plain_checkpoint, restore_rng
from .sampler import SkipSampler, train_sampler
from .strict import CheckpointMismatchError, load_strictly, state_dict_of

STRICT_HINT = ('Is it the config the checkpoint was trained with? To load '
               'only what fits, on purpose: --cfg-options strict_load=False.')


def _log(message: str, level: int = 30) -> None:
    print_log(message, logger='current', level=level)


@HOOKS.register_module()
class CheckpointSafetyHook(Hook):
    """What every run of ``tools/train.py`` / ``tools/test.py`` gets on top
    of :func:`~.mmengine_adapter.install`: local ``CheckpointHook``s write
    atomically and partial files of interrupted saves are removed
    (``before_run``); saved checkpoints hold tensors and plain Python only
    (:mod:`.plain`); a resumed file must be a Runner checkpoint and, with
    ``strict``, every key must fit (:func:`~.strict.load_strictly`).

    Args:
        strict (bool): check the keys (``--cfg-options strict_load=False``
            turns it off). Defaults to True.
    """

    priority = 'VERY_HIGH'

    def __init__(self, strict: bool = True):
        self.strict = strict

    def before_run(self, runner) -> None:
        for hook in runner.hooks:
            if (isinstance(hook, CheckpointHook) and hook.backend_args is None
                    and hook.file_client_args is None
                    and '://' not in str(hook.out_dir)):
                hook.backend_args = dict(backend='atomic_local')
        if is_main_process():
            if removed := remove_partial_files(runner.work_dir):
                _log(f'Removed {len(removed)} partial file(s) of interrupted '
                     f'saves: {removed}', 20)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        plain_checkpoint(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        # auto-resume: the file find_resume_checkpoint picked (logged)
        source = adapter.loads_from(runner) or 'the auto-resumed checkpoint'
        lacks = [k for k in ('state_dict', 'message_hub') if k not in
                 checkpoint] + [f"meta['{k}']" for k in ('epoch', 'iter')
                                if k not in checkpoint.get('meta', {})]
        if adapter.resuming(runner) and lacks:
            raise CheckpointMismatchError(
                f'{source!r} cannot be resumed: it has no {", ".join(lacks)}'
                ' (weights only). To start a new run from its weights: '
                f'tools/train.py CONFIG --cfg-options load_from={source} '
                '(without --resume).')
        if self.strict:
            model = runner.model.module if is_model_wrapper(
                runner.model) else runner.model
            load_strictly(model, state_dict_of(checkpoint, source),
                          repr(source), hint=STRICT_HINT)


def _hook_class(hook, scope):
    """The class a ``custom_hooks`` entry builds (None: unknown)."""
    kind = hook.get('type') if isinstance(hook, dict) else None
    if not isinstance(kind, str):
        return kind
    with MMENGINE_HOOKS.switch_scope_and_registry(hook.get(
            '_scope_', scope)) as registry:
        return registry.get(kind)


def add_checkpoint_hooks(cfg, training: bool):
    """Append :class:`CheckpointSafetyHook` (``strict`` from the config's
    ``strict_load``) and, for training, a :class:`LastCheckpointHook` with
    the config's ``last_checkpoint_hook`` settings (none: its defaults,
    ``last.pth`` every 10 minutes and on Ctrl-C;
    ``configs/_base_/resumable_runtime.py`` adds every 500 iterations;
    ``last_checkpoint_hook = None``: no hook), unless ``custom_hooks`` has
    one of that class already (under any name or scope: its settings are
    kept)."""
    strict = cfg.get('strict_load', True)
    if not isinstance(strict, bool):
        raise TypeError(f'strict_load must be True or False, got {strict!r}')
    hooks = list(cfg.get('custom_hooks', None) or [])
    present = [_hook_class(h, cfg.get('default_scope', None)) for h in hooks]
    last = cfg.get('last_checkpoint_hook', {}) if training else None
    wanted = [(CheckpointSafetyHook, dict(strict=strict))] + (
        [(LastCheckpointHook, last)] if last is not None else [])
    cfg.custom_hooks = hooks + [
        dict(type=kind.__name__, _scope_=SCOPE, **args)
        for kind, args in wanted if not any(
            isinstance(c, type) and issubclass(c, kind) for c in present)]
    return cfg


@HOOKS.register_module()
class LastCheckpointHook(CheckpointHook):
    """mmengine's ``CheckpointHook`` saving the Runner checkpoint to
    ``<work_dir>/<filename>`` (atomically) every ``interval`` iterations,
    at the end of the first iteration ``minutes`` after the last save, and
    on an interrupt (:mod:`.interrupt`: Ctrl-C or SIGTERM inside
    ``tools/train.py``, one process): the iteration under way finishes and
    is saved (during validation: the state it began with; the resumed run
    goes on after it), then the run ends with
    :class:`~.interrupt.TrainingInterrupted`. And exact resume.

    Every checkpoint the run saves gets ``resume_state``: the generator
    states and the training sampler's seed. On resume the sampler gets its
    seed back (mmengine rebuilds it with the new run's seed: with
    ``randomness.seed=None``, the OpenMMLab default, the resumed epochs
    would be shuffled otherwise), skips the indices of the batches already
    trained (without loading them), and the generators are set back right
    before the first resumed batch is drawn; validation runs on a copy of
    them. On one process with ``num_workers=0`` a run killed at any
    iteration and resumed ends bit-identical. Not restored: DataLoader
    worker generators; with ``diff_rank_seed=True``, ranks other than 0.

    Args:
        interval (int, optional): iterations between saves; None: not by
            iterations. Defaults to None.
        minutes (float, optional): the time after which the next iteration
            saves (process 0's clock: it writes the file); None: not by
            time. Defaults to 10.
        filename (str): file name in the work dir. Defaults to 'last.pth'.
    """

    def __init__(self, interval: Optional[int] = None,
                 minutes: Optional[float] = 10,
                 filename: str = 'last.pth'):
        if not (interval is None or type(interval) is int and interval > 0):
            raise ValueError(f'interval must be a positive int (iterations '
                             f'between saves) or None, got {interval!r}')
        if not (minutes is None or isinstance(minutes, Real) and not
                isinstance(minutes, bool) and minutes > 0):
            raise ValueError(f'minutes must be a positive number (time '
                             f'between saves) or None, got {minutes!r}')
        if not (isinstance(filename, str) and filename.endswith('.pth')
                and osp.basename(filename) == filename):
            raise ValueError('filename must be a file name ending in .pth '
                             f'(saved in the work dir), got {filename!r}')
        super().__init__(interval=interval or -1, by_epoch=False,
                         save_last=False, filename_tmpl=filename,
                         backend_args=dict(backend='atomic_local'))
        self.every, self.minutes = interval, minutes
        self._pending = self._val_rng = self._due = None

    def before_train(self, runner) -> None:
        super().before_train(runner)
        self._restart_clock()

    def _restart_clock(self) -> None:
        if self.minutes is not None:
            self._due = time.monotonic() + 60 * self.minutes

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        signum = pending()
        if signum is not None or (self.every and self.every_n_train_iters(
                runner, self.every)) or (self._due is not None and
                                         time.monotonic() >= self._due):
            runner.logger.info(
                f'Saving checkpoint at {runner.iter + 1} iterations')
            self._save_checkpoint(runner)  # meta: iter + 1
            self._restart_clock()
        if signum is not None:
            raise TrainingInterrupted(signum, runner.iter + 1, self.last_ckpt)

    def after_val_iter(self, runner, batch_idx: int, data_batch=None,
                       outputs=None) -> None:
        signum = pending()
        if signum is None or self._val_rng is None:  # not in training
            return
        # The state this validation began with (its generator states are
        # _val_rng), as an epoch checkpoint holds it: the resumed run goes
        # on after this validation without repeating it.
        runner.logger.info(f'Saving checkpoint at {runner.iter} iterations '
                           '(the state this validation began with)')
        self._save_checkpoint_with_step(runner, runner.iter, meta=dict(
            epoch=runner.epoch, iter=runner.iter))
        raise TrainingInterrupted(signum, runner.iter, self.last_ckpt)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        seed = getattr(train_sampler(runner.train_dataloader), 'seed', None)
        # during validation, the states before it (restored after it)
        rng = self._val_rng if self._val_rng is not None else capture_rng()
        checkpoint['resume_state'] = dict(rng=rng, sampler_seed=(
            seed if type(seed) is int else None))

    def before_val_epoch(self, runner) -> None:
        self._val_rng = capture_rng()

    def after_val_epoch(self, runner, metrics=None) -> None:
        if self._val_rng is not None:
            restore_rng(self._val_rng)
            self._val_rng = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not (adapter.resuming(runner) and
                adapter.exact_resume_supported()):
            return
        state = checkpoint.get('resume_state', {})  # checked by load()
        rng, seed = state.get('rng'), state.get('sampler_seed')
        if rng is None:
            _log('The resumed checkpoint has no generator states (saved '
                 'without LastCheckpointHook): the random draws differ.')
        if get_rank() != 0 and adapter.diff_rank_seed(runner):
            rng = None  # rank 0's states, not this rank's
        meta = checkpoint['meta']
        self._pending = (rng, seed, meta['epoch'], meta['iter'])

    def before_train_epoch(self, runner) -> None:
        if self._pending is None:
            return
        (rng, seed, epoch, it), self._pending = self._pending, None
        loop, loader = runner.train_loop, runner.train_dataloader
        seeded = train_sampler(loader)  # reads seed per epoch, or lazily
        if seed is not None and type(getattr(seeded, 'seed', None)) is int:
            seeded.seed = seed
        iter_based = isinstance(loop, IterBasedTrainLoop)
        skip = it if iter_based else it - epoch * len(loader)
        sampler = type(getattr(loader.batch_sampler, 'sampler', None))
        problem = None
        if not (iter_based or isinstance(loop, EpochBasedTrainLoop)):
            problem = f"{type(loop).__name__} is not one of mmengine's loops"
        elif not iter_based and not 0 <= skip <= len(loader):
            problem = (f'iteration {it} of epoch {epoch} does not match '
                       f'{len(loader)} batches per epoch (data changed?)')
        elif iter_based and skip and sampler.__name__ != 'InfiniteSampler':
            problem = f'IterBasedTrainLoop needs InfiniteSampler, not ' \
                f'{sampler.__name__}'
        if problem:
            return _log(f'Resume is not exact: {problem}; the sampler '
                        'position and random draws are mmengine\'s own.')

        # right before the first resumed batch is drawn
        restore = (lambda: restore_rng(rng)) if rng else (lambda: None)
        if skip == 0:  # an epoch boundary: before the epoch's iterator
            return restore()
        if not SkipSampler.install(loader, skip, restore):
            return _log('Resume is not exact: the epoch restarts at its first '
                        "batch (torch's BatchSampler only skips, not "
                        f'{type(loader.batch_sampler).__name__}).')
        if iter_based:
            adapter.skip_iterations(loop, loader, skip)
        _log(f'Resuming at batch {skip} of the sampler order without loading '
             'the skipped batches', 20)
