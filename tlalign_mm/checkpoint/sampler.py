"""Resume the training data stream at the batch the checkpoint reached.

mmengine's ``EpochBasedTrainLoop`` restarts a resumed epoch at its first
batch (training those batches twice), and ``IterBasedTrainLoop`` reaches its
position by *loading* every batch it skips (slow, and the skipped batches'
augmentations draw random numbers the uninterrupted run never drew at that
point). Here the position is restored at the level of sample *indices*: the
sampler skips the indices of the batches already trained, nothing is loaded,
and a callback runs right before the first index of the first resumed batch
is drawn, the moment to set the random number generators back.
"""
import itertools
from typing import Callable, Iterator, Optional

from torch.utils.data import BatchSampler, DataLoader

__all__ = ['FastForward', 'SkipSampler']


class SkipSampler:
    """Wraps a sampler: the first pass skips ``skip`` indices and calls
    ``on_start`` just before yielding the next one; later passes are the
    wrapped sampler's.

    Installed as ``dataloader.batch_sampler.sampler`` (the DataLoader's own
    ``sampler`` attribute cannot be reassigned); everything else
    (``set_epoch``, ``seed``, ...) is the wrapped sampler's.

    Args:
        sampler: the sampler to wrap.
        skip (int): indices to skip on the first pass (batches trained times
            the batch size).
        on_start (callable, optional): called once, before the first index
            after the skipped ones is drawn (even if none is left).
    """

    def __init__(self, sampler, skip: int,
                 on_start: Optional[Callable[[], None]] = None):
        self.sampler = sampler
        self.skip = skip
        self.on_start = on_start
        self._used = False

    def __iter__(self) -> Iterator[int]:
        if self._used:
            yield from self.sampler
            return
        self._used = True
        indices = iter(self.sampler)
        next(itertools.islice(indices, self.skip, self.skip), None)
        if self.on_start is not None:
            self.on_start()
        yield from indices

    def __len__(self) -> int:
        length = len(self.sampler)
        return length if self._used else max(length - self.skip, 0)

    def __getattr__(self, name):
        if name == 'sampler':  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.sampler, name)

    @staticmethod
    def install(dataloader: DataLoader, skip_batches: int,
                on_start: Optional[Callable[[], None]] = None) -> bool:
        """Wrap ``dataloader.batch_sampler.sampler``; False (nothing done)
        when the DataLoader does not batch with torch's ``BatchSampler``
        (e.g. mmdet's aspect-ratio grouping, where skipping samples is not
        skipping batches)."""
        batch_sampler = getattr(dataloader, 'batch_sampler', None)
        if type(batch_sampler) is not BatchSampler:
            return False
        batch_sampler.sampler = SkipSampler(
            batch_sampler.sampler, skip_batches * batch_sampler.batch_size,
            on_start)
        return True

    @staticmethod
    def uninstall(dataloader: DataLoader) -> None:
        batch_sampler = getattr(dataloader, 'batch_sampler', None)
        if isinstance(getattr(batch_sampler, 'sampler', None), SkipSampler):
            batch_sampler.sampler = batch_sampler.sampler.sampler


class FastForward:
    """Stands in for ``IterBasedTrainLoop.dataloader_iterator``: the loop's
    ``calls`` skip-``next()`` calls return ``None`` at once (the skipping
    is done by :class:`SkipSampler`), later calls are ``iterator``'s."""

    def __init__(self, calls: int, iterator):
        self.calls = calls
        self.iterator = iterator

    def __iter__(self):
        return self

    def __next__(self):
        if self.calls > 0:
            self.calls -= 1
            return None
        return next(self.iterator)
