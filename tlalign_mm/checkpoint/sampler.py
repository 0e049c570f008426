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
from typing import Callable

from torch.utils.data import BatchSampler, DataLoader


class SkipSampler:
    """Wraps a sampler: the first pass skips ``skip`` indices and calls
    ``on_start`` just before yielding the next one (even if none is left);
    later passes, and every other attribute (``set_epoch``, ``seed``...),
    are the wrapped sampler's.

    Installed as ``dataloader.batch_sampler.sampler`` (the DataLoader's own
    ``sampler`` attribute cannot be reassigned) by :meth:`install`; after
    its first pass it stays in place, transparent.
    """

    def __init__(self, sampler, skip: int, on_start: Callable[[], None]):
        self.sampler, self.skip, self.on_start = sampler, skip, on_start

    def __iter__(self):
        indices = iter(self.sampler)
        if self.skip is not None:
            next(itertools.islice(indices, self.skip, self.skip), None)
            self.skip = None
            self.on_start()
        yield from indices

    def __len__(self) -> int:
        return max(len(self.sampler) - (self.skip or 0), 0)

    def __getattr__(self, name):
        if name == 'sampler':  # not set yet (e.g. while unpickling)
            raise AttributeError(name)
        return getattr(self.sampler, name)

    @staticmethod
    def install(dataloader: DataLoader, skip_batches: int,
                on_start: Callable[[], None]) -> bool:
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


def train_sampler(loader):
    """The sampler a training DataLoader draws its indices from."""
    sampler = getattr(getattr(loader, 'batch_sampler', None), 'sampler',
                      getattr(loader, 'sampler', None))
    return getattr(sampler, 'sampler', sampler)  # inside a SkipSampler


def set_sampler_seed(sampler, seed: int) -> None:
    """Shuffle with ``seed`` from the next index on: mmengine's
    ``DefaultSampler`` reads ``seed`` per epoch, ``InfiniteSampler`` when
    its index stream draws its first index (a generator, lazy)."""
    if type(getattr(sampler, 'seed', None)) is int:
        sampler.seed = seed
