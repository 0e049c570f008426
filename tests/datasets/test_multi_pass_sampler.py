"""MultiPassSampler: the SPT/LSA epoch of three shuffled passes, against a
verbatim port of the original RASampler, on one rank and split across
two."""
import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from tlalign_mm.datasets import MultiPassSampler
from tlalign_mm.datasets import multi_pass_sampler as module


class OriginalRASampler(torch.utils.data.Sampler):
    """aanna0701/SPT_LSA_ViT@54bd796 utils/sampler.py:14-63, verbatim but
    ``__len__`` and ``shuffle=False`` (unused here)."""

    def __init__(self, dataset_len, batch_size, repetitions=1, len_factor=3.0,
                 shuffle=False, drop_last=False):
        self.dataset_len = dataset_len
        self.batch_size = batch_size
        self.repetitions = repetitions
        self.len_images = int(dataset_len * len_factor)
        self.shuffle = shuffle
        self.drop_last = drop_last

    def shuffler(self):
        def new_perm():
            return iter(np.random.permutation(self.dataset_len))
        shuffle = new_perm()
        while True:
            try:
                index = next(shuffle)
            except StopIteration:
                shuffle = new_perm()
                index = next(shuffle)
            for repetition in range(self.repetitions):
                yield index

    def __iter__(self):
        shuffle = iter(self.shuffler())
        batch = []
        for _ in range(self.len_images):
            index = next(shuffle)
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch


def original_batches(n, seed, batch_size):
    np.random.seed(seed)
    return [[int(i) for i in b] for b in OriginalRASampler(
        n, batch_size, 1, 3, shuffle=True, drop_last=True)]


def loader_batches(n, seed, batch_size):
    """Built as a config builds it (mmengine's Runner.build_dataloader)."""
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return [[int(i) for i in b] for b in Runner.build_dataloader(
            dict(batch_size=batch_size, num_workers=0, drop_last=True,
                 dataset=list(range(n)),
                 sampler=dict(type='MultiPassSampler', num_passes=3)),
            seed=seed)]


@pytest.mark.parametrize('n, seed', [(1000, 0), (1037, 12345)])
def test_stream_equals_the_original_rasampler(n, seed):
    assert loader_batches(n, seed, 128) == original_batches(n, seed, 128)


def test_two_ranks_cover_the_same_stream(monkeypatch):
    """Each rank's seed is the synced one (seed=None); one step's two
    batches are the original's batch of 2 x 64 indices."""
    n, batch = 1037, 64
    monkeypatch.setattr(module, 'sync_random_seed', lambda: 5)
    per_rank = []
    for rank in range(2):
        monkeypatch.setattr(module, 'get_dist_info', lambda r=rank: (r, 2))
        per_rank.append(loader_batches(n, None, batch))
    assert len(per_rank[0]) == len(per_rank[1]) == (3 * n // 2) // batch
    expected = original_batches(n, 5, batch_size=2 * batch)
    for step, (b0, b1) in enumerate(zip(*per_rank)):
        merged = np.empty(2 * batch, dtype=int)
        merged[0::2], merged[1::2] = b0, b1
        assert merged.tolist() == expected[step]


def test_epochs_differ_and_repeat_with_the_seed():
    s = MultiPassSampler(range(50), seed=7)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first
    s.set_epoch(0)
    assert list(s) == first


@pytest.mark.parametrize('kwargs,match', [
    (dict(dataset=range(10), num_passes=0), 'num_passes'),
    (dict(dataset=range(0)), 'empty')])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiPassSampler(seed=0, **kwargs)
