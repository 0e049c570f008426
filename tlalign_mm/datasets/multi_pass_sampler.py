"""The small-data epoch of the SPT/LSA code: several shuffled passes.

aanna0701/SPT_LSA_ViT (54bd796) trains with
``RASampler(len(train_dataset), batch_size, 1, args.ra, shuffle=True,
drop_last=True)`` (``main.py:221-223``, ``--ra 3`` at ``main.py:98``): an
epoch (``utils/sampler.py:23-57``) of three fresh ``np.random.permutation``
passes laid end to end and cut into batches, the last partial one dropped
(``floor(3 N / batch)`` iterations). mmpretrain's ``RepeatAugSampler``
(DeiT's: each image ``num_repeats`` times side by side, N samples) is
another epoch; no mmengine or mmpretrain sampler gives this one.
"""
import math
from typing import Iterator, Optional, Sized

import numpy as np
from mmengine.dist import get_dist_info, sync_random_seed
from mmpretrain.registry import DATA_SAMPLERS
from torch.utils.data import Sampler

__all__ = ['MultiPassSampler', 'multi_pass_indices']


def multi_pass_indices(dataset_len: int, num_passes: float,
                       rng: Optional[np.random.RandomState]) -> np.ndarray:
    """One epoch's ``int(dataset_len * num_passes)`` indices from
    consecutive ``rng.permutation`` s of ``range(dataset_len)`` (as
    ``RASampler.shuffler``; in order when ``rng`` is None)."""
    length = int(dataset_len * num_passes)
    perms = [
        rng.permutation(dataset_len) if rng is not None else
        np.arange(dataset_len)
        for _ in range(math.ceil(length / dataset_len))
    ]
    return np.concatenate(perms)[:length]


@DATA_SAMPLERS.register_module()
class MultiPassSampler(Sampler):
    """An epoch of ``num_passes`` shuffled passes over the dataset, split
    across ranks: SPT_LSA_ViT's ``RASampler`` with ``repetitions=1``.

    An epoch's stream is drawn from ``np.random.RandomState(seed +
    epoch)``: ``RASampler`` alone after ``np.random.seed(seed)`` gives the
    first epoch (in the original's run later passes draw from NumPy's global
    state after the training loop's draws, ``utils/sampler.py:31-44``,
    ``main.py:334-336``). Rank ``r`` takes ``stream[r::world_size]`` of the
    stream cut to a multiple of the world size: one step's batches together
    are the original's ``world_size * batch_size`` consecutive indices. Set
    the dataloader's ``drop_last=True`` as the original (``main.py:223``).

    Args:
        num_passes (float): passes per epoch (``len_factor``, ``--ra``).
            Defaults to 3.
        shuffle (bool): a fresh permutation per pass, else in order.
            Defaults to True.
        seed (int, optional): the same on every rank; None draws one and
            syncs it. Defaults to None.
    """

    def __init__(self, dataset: Sized, num_passes: float = 3,
                 shuffle: bool = True, seed: Optional[int] = None):
        if not num_passes > 0:
            raise ValueError(
                f'MultiPassSampler: num_passes must be > 0, got {num_passes}.')
        if len(dataset) == 0:
            raise ValueError('MultiPassSampler: the dataset is empty.')
        self.rank, self.world_size = get_dist_info()
        self.dataset = dataset
        self.num_passes = num_passes
        self.shuffle = shuffle
        self.seed = sync_random_seed() if seed is None else seed
        self.epoch = 0
        total = int(len(dataset) * num_passes)
        self.num_samples = total // self.world_size

    def __iter__(self) -> Iterator[int]:
        rng = np.random.RandomState(self.seed + self.epoch) \
            if self.shuffle else None
        stream = multi_pass_indices(len(self.dataset), self.num_passes, rng)
        stream = stream[:self.num_samples * self.world_size]
        return iter(stream[self.rank::self.world_size].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch's stream is drawn from ``seed + epoch``."""
        self.epoch = epoch
