"""Resume the training data stream at the batch the checkpoint reached.

mmengine's ``EpochBasedTrainLoop`` restarts a resumed epoch at its first
batch, and ``IterBasedTrainLoop`` *loads* every batch it skips (whose
augmentations draw random numbers). Here the sampler skips the indices,
nothing is loaded, and a callback runs right before the first resumed index
is drawn: the moment to set the generators back.
"""
import itertools
from typing import Callable

from torch.utils.data import BatchSampler, DataLoader


class SkipSampler:
    """Wraps a sampler: the first pass skips ``skip`` indices and calls
    ``on_start`` before yielding the next (even if none is left); later
    passes and other attributes (``set_epoch``, ``seed``) are the wrapped
    sampler's. Installed as ``dataloader.batch_sampler.sampler``."""

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
        unless it batches with torch's ``BatchSampler`` (mmdet's
        aspect-ratio grouping: skipping samples is not skipping batches)."""
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
