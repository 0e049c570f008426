"""The small-data epoch of the SPT/LSA code: several shuffled passes.

aanna0701/SPT_LSA_ViT (54bd796) trains with
``RASampler(len(train_dataset), batch_size, 1, args.ra, shuffle=True,
drop_last=True)`` (``main.py:221-223``, ``--ra 3`` at ``main.py:98``). With
``repetitions=1`` and ``len_factor=3`` its epoch (``utils/sampler.py:23-57``)
is three fresh ``np.random.permutation`` passes over the dataset, laid end
to end and cut into batches, the last partial batch dropped: no image is
repeated inside a pass, and an epoch has ``floor(3 N / batch)`` iterations.
mmpretrain's ``RepeatAugSampler`` (DeiT's repeated augmentation: each image
``num_repeats`` times side by side, N samples per epoch) is a different
epoch; no mmengine or mmpretrain sampler gives this one.
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
    """The index stream of one epoch: ``int(dataset_len * num_passes)``
    indices from consecutive permutations of ``range(dataset_len)``
    (``rng.permutation``, as ``RASampler.shuffler``; in order when ``rng``
    is None)."""
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

    The epoch's stream is drawn from ``np.random.RandomState(seed + epoch)``:
    ``RASampler`` iterated alone after ``np.random.seed(seed)`` gives the
    first epoch. In the original's run each later pass is drawn from
    NumPy's global state after the training loop's own draws
    (``utils/sampler.py:31-44``, ``main.py:334-336``), so only the first
    pass of the first epoch is that run's.
    The stream is cut to a multiple of the world size and rank ``r`` takes
    ``stream[r::world_size]``: the ranks' batches of one step together are
    the original's batch of ``world_size * batch_size`` consecutive indices.
    Set the dataloader's ``drop_last=True`` to drop the last partial batch
    as the original does (``drop_last=True`` at ``main.py:223``).

    Args:
        dataset (Sized): the dataset.
        num_passes (float): passes per epoch (the original's ``len_factor``,
            ``--ra``). Defaults to 3.
        shuffle (bool): a fresh permutation per pass; False gives the passes
            in order. Defaults to True.
        seed (int, optional): the same on every rank; None draws one and
            syncs it. Defaults to None.
    """

    def __init__(self,
                 dataset: Sized,
                 num_passes: float = 3,
                 shuffle: bool = True,
                 seed: Optional[int] = None):
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
