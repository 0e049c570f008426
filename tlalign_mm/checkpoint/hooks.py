"""The hooks: safe checkpoints for every run, and exact resume.

* :class:`CheckpointSafetyHook` (``tools/train.py`` and ``tools/test.py``
  add it to every run, :func:`add_checkpoint_hooks`): strict loads, atomic
  writes, auto-resume from the newest intact checkpoint, checkpoints of
  tensors and plain Python, and no path from a checkpoint used outside the
  work dir.
* :class:`LastCheckpointHook`: mmengine's ``CheckpointHook`` saving
  ``last.pth`` every N iterations, with the random number generator states,
  and a resume that continues at the batch the checkpoint reached with the
  same draws.
"""
import os.path as osp

from mmengine.dist import get_rank, is_main_process
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.runner.loops import EpochBasedTrainLoop, IterBasedTrainLoop

from tlalign_mm.registry import HOOKS, SCOPE

from . import mmengine_adapter as adapter
from .files import find_resume_checkpoint, inside, remove_partial_files
from .load import CheckpointError
from .plain import capture_rng, check_rng, plain_checkpoint, restore_rng
from .sampler import SkipSampler, set_sampler_seed, train_sampler
from .strict import CheckpointMismatchError, load_strictly, state_dict_of

STRICT_HINT = ('Is the config the one the checkpoint was trained with? To '
               'load only the tensors that fit, on purpose: --cfg-options '
               'strict_load=False.')


def _log(message: str, level: int = 30) -> None:
    print_log(message, logger='current', level=level)


@HOOKS.register_module()
class CheckpointSafetyHook(Hook):
    """What every run through ``tools/train.py`` / ``tools/test.py`` gets.

    * ``before_run``: local ``CheckpointHook``s write atomically (backend
      ``atomic_local``); temporary files of interrupted saves are removed;
      auto-resume (``--resume`` without a path) picks
      :func:`~.files.find_resume_checkpoint`'s file.
    * ``before_save_checkpoint``: the message hub, meta and scheduler
      states become tensors and plain Python (:mod:`.plain`).
    * ``after_load_checkpoint`` (``load_from``, ``--resume``,
      ``tools/test.py``): a resumed file must be a Runner checkpoint; with
      ``strict``, every key must fit (:func:`~.strict.load_strictly`);
      checkpoint paths in the resumed message hub (``best_ckpt``,
      ``last_ckpt``) that are not files inside the run's checkpoint
      folders are dropped (``CheckpointHook`` would delete them).

    Args:
        strict (bool): check the keys (``--cfg-options strict_load=False``
            turns it off). Defaults to True.
    """

    priority = 'VERY_HIGH'

    def __init__(self, strict: bool = True):
        adapter.check_version()
        self.strict = strict

    def before_run(self, runner) -> None:
        for hook in runner.hooks:
            if (isinstance(hook, CheckpointHook) and hook.backend_args is None
                    and hook.file_client_args is None
                    and '://' not in str(hook.out_dir)):
                hook.backend_args = dict(backend='atomic_local')
        if is_main_process():
            removed = remove_partial_files(runner.work_dir)
            if removed:
                _log(f'Removed {len(removed)} partial file(s) of interrupted '
                     f'saves: {removed}', 20)
        if adapter.resuming(runner) and adapter.loads_from(runner) is None:
            path = find_resume_checkpoint(runner.work_dir)
            if path is not None:
                adapter.set_auto_resume_file(runner, path)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        plain_checkpoint(checkpoint)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        source = str(adapter.loads_from(runner))
        if adapter.resuming(runner):
            lacks = [k for k in ('meta', 'state_dict', 'message_hub')
                     if k not in checkpoint]
            if 'meta' in checkpoint and not {'epoch', 'iter'} <= set(
                    checkpoint['meta']):
                lacks.append("meta['epoch'] / meta['iter']")
            if lacks:
                raise CheckpointMismatchError(
                    f'{source!r} cannot be resumed: it has no '
                    f'{", ".join(lacks)} (weights only). To start a new run '
                    'from its weights: tools/train.py CONFIG --cfg-options '
                    f'load_from={source} (without --resume).')
            self._drop_outside_paths(runner, checkpoint['message_hub'])
        if self.strict:
            model = runner.model.module if is_model_wrapper(
                runner.model) else runner.model
            load_strictly(model, state_dict_of(checkpoint, source),
                          repr(source), hint=STRICT_HINT)

    @staticmethod
    def _drop_outside_paths(runner, hub) -> None:
        info = hub.get('runtime_info') if isinstance(hub, dict) else None
        info = info if isinstance(info, dict) else {}
        folders = [runner.work_dir] + [
            h.out_dir for h in runner.hooks
            if isinstance(h, CheckpointHook) and isinstance(h.out_dir, str)]
        for key in [k for k in info if str(k).startswith('best_ckpt')
                    or k == 'last_ckpt']:
            path = info[key]
            if not (isinstance(path, str) and osp.isfile(path) and any(
                    inside(path, f) for f in folders)):
                _log(f'The resumed {key} = {path!r} is not a checkpoint of '
                     'this run (save_best would delete it): dropped')
                del info[key]
        ids = info.get('keep_ckpt_ids', [])
        if not (isinstance(ids, list)
                and all(type(i) is int and i >= 0 for i in ids)):
            _log(f'The resumed keep_ckpt_ids {ids!r} are not iteration '
                 'numbers: dropped')
            del info['keep_ckpt_ids']


def add_checkpoint_hooks(cfg, training: bool):
    """Append :class:`CheckpointSafetyHook` (``strict`` from the config's
    ``strict_load``) and, for training with a ``last_checkpoint_hook``
    setting (``configs/_base_/resumable_runtime.py``), a
    :class:`LastCheckpointHook`, unless the config lists them already."""
    strict = cfg.get('strict_load', True)
    if not isinstance(strict, bool):
        raise TypeError(f'strict_load must be True or False, got {strict!r}')
    hooks = list(cfg.get('custom_hooks', None) or [])
    present = {h.get('type') for h in hooks if isinstance(h, dict)}
    wanted = [dict(type='CheckpointSafetyHook', _scope_=SCOPE, strict=strict)]
    last = cfg.get('last_checkpoint_hook', None)
    if training and last is not None:
        wanted.append(dict(type='LastCheckpointHook', _scope_=SCOPE, **last))
    cfg.custom_hooks = hooks + [h for h in wanted
                                if h['type'] not in present]
    return cfg


@HOOKS.register_module()
class LastCheckpointHook(CheckpointHook):
    """``last.pth`` every ``interval`` iterations; exact resume.

    * mmengine's ``CheckpointHook`` (``by_epoch=False``, written atomically)
      saves the full Runner checkpoint to ``<work_dir>/<filename>`` and
      names it in ``last_checkpoint``: a killed job loses at most
      ``interval`` iterations.
    * Every checkpoint the run saves gets ``resume_state``: the Python,
      numpy, torch (and CUDA) generator states, and the training sampler's
      shuffling seed.
    * On resume the sampler gets its seed back (mmengine builds it with the
      new run's seed and restores only the global one: with
      ``randomness.seed=None``, the default of mmpretrain's, mmseg's and
      mmdet's runtimes, the resumed epochs would be shuffled otherwise),
      skips the indices of the batches already
      trained (without loading them) and the generators are set back right
      before the first resumed batch is drawn. Validation runs on a copy of
      the generator states.

    On one process with ``num_workers=0``, a run killed at any iteration and
    resumed ends with bit-identical weights
    (``tests/engine/test_kill_and_resume.py``). Not restored: DataLoader
    worker generators; with ``randomness.diff_rank_seed=True``, ranks other
    than 0.

    Args:
        interval (int): iterations between saves. Defaults to 500.
        filename (str): file name in the work dir. Defaults to 'last.pth'.
    """

    def __init__(self, interval: int = 500, filename: str = 'last.pth'):
        if not (type(interval) is int and interval > 0):
            raise ValueError(f'interval must be a positive int (iterations '
                             f'between saves), got {interval!r}')
        if not (isinstance(filename, str) and filename.endswith('.pth')
                and osp.basename(filename) == filename):
            raise ValueError('filename must be a file name ending in .pth '
                             f'(saved in the work dir), got {filename!r}')
        adapter.check_version()
        super().__init__(interval=interval, by_epoch=False, save_last=False,
                         filename_tmpl=filename,
                         backend_args=dict(backend='atomic_local'))
        self._pending = self._val_rng = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        seed = getattr(train_sampler(runner.train_dataloader),
                       'seed', None)
        if type(seed) is not int:
            seed = None
        checkpoint['resume_state'] = dict(rng=capture_rng(),
                                          sampler_seed=seed)

    def before_val_epoch(self, runner) -> None:
        self._val_rng = capture_rng()

    def after_val_epoch(self, runner, metrics=None) -> None:
        if self._val_rng is not None:
            restore_rng(self._val_rng)
            self._val_rng = None

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not adapter.resuming(runner):
            return
        state = checkpoint.get('resume_state')
        rng = state.get('rng') if isinstance(state, dict) else None
        seed = state.get('sampler_seed') if isinstance(state, dict) else None
        try:
            if rng is not None:
                check_rng(rng)
            if seed is not None and type(seed) is not int:
                raise TypeError(f'sampler_seed {type(seed).__name__}')
        except Exception as error:  # noqa: BLE001  named below
            raise CheckpointError(
                f'Refused checkpoint {adapter.loads_from(runner)!r}: its '
                f'resume_state is not a generator state ({error})') from None
        if rng is None:
            _log('The resumed checkpoint has no random number generator '
                 'states (saved without LastCheckpointHook): the sampler '
                 'position is restored, the random draws are not.')
        if get_rank() != 0 and adapter.diff_rank_seed(runner):
            rng = None  # rank 0's states, not this rank's
        meta = checkpoint['meta']
        self._pending = (rng, seed, meta['epoch'], meta['iter'])

    def before_train_epoch(self, runner) -> None:
        if self._pending is None:
            return
        (rng, seed, epoch, it), self._pending = self._pending, None
        loop, loader = runner.train_loop, runner.train_dataloader
        if seed is not None:
            set_sampler_seed(train_sampler(loader), seed)
        iter_based = isinstance(loop, IterBasedTrainLoop)
        skip = it if iter_based else it - epoch * len(loader)
        sampler = type(getattr(loader.batch_sampler, 'sampler', None))
        problem = None
        if not (iter_based or isinstance(loop, EpochBasedTrainLoop)):
            problem = f'{type(loop).__name__} is not one of mmengine\'s loops'
        elif not iter_based and not 0 <= skip <= len(loader):
            problem = (f'iteration {it} of epoch {epoch} does not match '
                       f'{len(loader)} batches per epoch (batch size or data '
                       'changed?)')
        elif iter_based and skip and sampler.__name__ != 'InfiniteSampler':
            problem = f'IterBasedTrainLoop needs InfiniteSampler, not ' \
                f'{sampler.__name__}'
        if problem:
            return _log(f'Resume is not exact: {problem}; the sampler '
                        'position and random draws are mmengine\'s own.')

        def restore():  # right before the first resumed batch is drawn
            if rng:
                restore_rng(rng)

        if skip == 0:  # an epoch boundary: before the epoch's iterator
            return restore()
        if not SkipSampler.install(loader, skip, restore):
            return _log('Resume is not exact: the resumed epoch restarts at '
                        'its first batch (the sampler position is restored '
                        "with torch's BatchSampler only, not "
                        f'{type(loader.batch_sampler).__name__}).')
        if iter_based:
            adapter.skip_iterations(loop, loader, skip)
        _log(f'Resuming at batch {skip} of the sampler order without loading '
             'the skipped batches', 20)
