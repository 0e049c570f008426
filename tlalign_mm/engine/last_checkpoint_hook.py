"""A periodic "last" checkpoint, and resumes that continue exactly.

mmpretrain's ImageNet recipes save a checkpoint once per epoch: a job killed
mid-epoch (preempted, out of memory) loses up to an epoch, about 1,250
iterations at batch 1,024. And a resumed run is not the run that was
interrupted: mmengine restores weights, optimizer and schedules, but not the
random number generators, nor the position in the epoch's sample order.
"""
import logging
import os.path as osp
from typing import Optional

from mmengine.dist import get_rank, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner.loops import (
    EpochBasedTrainLoop,
    IterBasedTrainLoop,
    _InfiniteDataloaderIterator,
)

from .checkpoint_files import write_last_checkpoint
from .registry import HOOKS
from .rng_state import capture_rng, restore_rng
from .sampler_position import FastForward, SkipSampler

__all__ = ['LastCheckpointHook']

RESUME_STATE = 'resume_state'


@HOOKS.register_module()
class LastCheckpointHook(Hook):
    """Save ``last.pth`` every ``interval`` iterations; resume exactly.

    * Every ``interval`` training iterations it saves the full Runner
      checkpoint (weights, optimizer, schedules, message hub) to
      ``<work_dir>/<filename>``, overwriting the previous one atomically
      (temporary file, then rename), and records it in ``last_checkpoint``
      (relative to the work dir). A killed job loses at most ``interval``
      iterations; ``tools/train.py CONFIG --resume`` picks it up.
    * Every checkpoint the run saves (this hook's and ``CheckpointHook``'s)
      also gets ``resume_state``: the Python, numpy, torch (and CUDA) random
      number generator states at the time of the save.
    * On resume it restores the sampler position (the indices of the
      batches already trained in the current epoch, or of the infinite
      stream, are skipped without loading them) and sets the generators
      back right before the first resumed batch is drawn. Validation runs
      with its own copy of the generator states, so evaluating does not
      shift the training draws.

    So, on one process with ``num_workers=0``, a run killed at any
    iteration and resumed ends with bit-identical weights to the
    uninterrupted run (``tests/engine/test_kill_and_resume.py``). Not
    restored: the generators of DataLoader worker processes; in distributed
    runs with ``randomness.diff_rank_seed=True``, the generators of ranks
    other than 0 (the checkpoint is written by rank 0).

    Args:
        interval (int): iterations between saves. Defaults to 500.
        filename (str): file name in the work dir. Defaults to
            ``'last.pth'``.
    """

    # after ParamSchedulerHook (LOW) and EMAHook have stepped for the
    # iteration, so the saved state is the state after it
    priority = 'VERY_LOW'

    def __init__(self, interval: int = 500, filename: str = 'last.pth'):
        if not (isinstance(interval, int) and interval > 0):
            raise ValueError(f'interval must be a positive int (iterations '
                             f'between saves), got {interval!r}')
        if not (isinstance(filename, str) and filename.endswith('.pth')
                and osp.basename(filename) == filename):
            raise ValueError('filename must be a file name ending in .pth '
                             f'(saved in the work dir), got {filename!r}')
        self.interval = interval
        self.filename = filename
        self._pending: Optional[dict] = None
        self._val_rng: Optional[dict] = None

    # -- saving ------------------------------------------------------------

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None) -> None:
        if not self.every_n_train_iters(runner, self.interval):
            return
        runner.save_checkpoint(
            runner.work_dir,
            self.filename,
            meta=dict(epoch=runner.epoch, iter=runner.iter + 1),
            by_epoch=False,
            backend_args=dict(backend='atomic_local'))
        if is_main_process():
            write_last_checkpoint(runner.work_dir,
                                  osp.join(runner.work_dir, self.filename))

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[RESUME_STATE] = dict(rng=capture_rng())

    # -- validation does not shift the training draws ----------------------

    def before_val_epoch(self, runner) -> None:
        self._val_rng = capture_rng()

    def after_val_epoch(self, runner, metrics=None) -> None:
        if self._val_rng is not None:
            restore_rng(self._val_rng)
            self._val_rng = None

    # -- resuming ------------------------------------------------------------

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not runner._resume:
            return
        state = checkpoint.get(RESUME_STATE)
        meta = checkpoint.get('meta', {})
        self._pending = dict(
            rng=state.get('rng') if isinstance(state, dict) else None,
            epoch=meta.get('epoch'), iter=meta.get('iter'))
        if self._pending['rng'] is None:
            print_log(
                'The resumed checkpoint has no random number generator '
                'states (saved without LastCheckpointHook): the sampler '
                'position is restored, the random draws are not.',
                logger='current', level=logging.WARNING)
        elif get_rank() != 0 and runner._randomness_cfg.get(
                'diff_rank_seed', False):
            self._pending['rng'] = None  # rank 0's states, not this rank's

    def before_train_epoch(self, runner) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        loop, loader = runner.train_loop, runner.train_dataloader
        rng = pending['rng']

        def restore():
            if rng is not None:
                restore_rng(rng)

        if isinstance(loop, EpochBasedTrainLoop):
            skip = pending['iter'] - pending['epoch'] * len(loader)
            if not 0 <= skip <= len(loader):
                print_log(f'Resuming at iteration {pending["iter"]} of epoch '
                          f'{pending["epoch"]} does not match {len(loader)} '
                          'batches per epoch (batch size or data changed?): '
                          'the epoch restarts at its first batch.',
                          logger='current', level=logging.WARNING)
                skip = 0
        elif isinstance(loop, IterBasedTrainLoop):
            skip = pending['iter']
        else:
            print_log(f'{type(loop).__name__}: the sampler position and '
                      'random states are not restored.', logger='current',
                      level=logging.WARNING)
            return
        if skip == 0:  # an epoch boundary: before the epoch's iterator
            restore()
            return
        sampler = getattr(loader.batch_sampler, 'sampler', None)
        if isinstance(loop, IterBasedTrainLoop) and not type(
                sampler).__name__ == 'InfiniteSampler':
            print_log('Exact resume of an IterBasedTrainLoop needs '
                      f'InfiniteSampler, not {type(sampler).__name__}: '
                      "mmengine's own (slower, inexact) skipping is used.",
                      logger='current', level=logging.WARNING)
            return
        if not SkipSampler.install(loader, skip, restore):
            print_log(
                f'The sampler position cannot be restored with batch sampler '
                f'{type(loader.batch_sampler).__name__} (only torch\'s '
                'BatchSampler): the resumed epoch restarts at its first '
                'batch.', logger='current', level=logging.WARNING)
            return
        if isinstance(loop, IterBasedTrainLoop):
            # the loop calls next() `iter` times to skip: make those free
            loop.dataloader_iterator = FastForward(
                skip, _InfiniteDataloaderIterator(loader))
        print_log(f'Resuming at batch {skip} of the sampler order without '
                  'loading the skipped batches', logger='current')

    def after_train_epoch(self, runner) -> None:
        SkipSampler.uninstall(runner.train_dataloader)
