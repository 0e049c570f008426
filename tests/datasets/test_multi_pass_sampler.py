"""MultiPassSampler: the SPT/LSA epoch of three shuffled passes, against
the original RASampler, on one rank and split across two."""
import itertools

import numpy as np
import pytest
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from tlalign_mm.datasets import MultiPassSampler
from tlalign_mm.datasets import multi_pass_sampler as module


def original_batches(n, seed, batch_size):
    """aanna0701/SPT_LSA_ViT@54bd796 utils/sampler.py:14-63 as one
    expression (repetitions=1, len_factor=3, drop_last=True): ``shuffler``
    draws ``np.random.permutation(n)`` anew each time the last runs out,
    ``__iter__`` cuts its first ``int(3 * n)`` indices into full batches."""
    np.random.seed(seed)
    stream = list(itertools.islice(itertools.chain.from_iterable(
        np.random.permutation(n) for _ in itertools.count()), int(n * 3.0)))
    return [[int(i) for i in stream[k:k + batch_size]]
            for k in range(0, len(stream) - batch_size + 1, batch_size)]


def loader_batches(n, seed, batch_size):
    """Built as a config builds it (mmengine's Runner.build_dataloader);
    the sampler's ``len`` is the number of indices it gives this rank."""
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        loader = Runner.build_dataloader(dict(
            batch_size=batch_size, num_workers=0, drop_last=True,
            dataset=list(range(n)),
            sampler=dict(type='MultiPassSampler', num_passes=3)), seed=seed)
    assert len(loader.sampler) == len(list(loader.sampler))
    return [[int(i) for i in b] for b in loader]


@pytest.mark.parametrize('n, seed', [(1000, 0), (1037, 12345)])
def test_stream_equals_the_original_rasampler(n, seed):
    assert loader_batches(n, seed, 128) == original_batches(n, seed, 128)


def test_two_ranks_cover_the_same_stream(monkeypatch):
    """Each rank's seed is the synced one (seed=None); one step's two
    batches are the original's batch of 2 x 64 indices."""
    monkeypatch.setattr(module, 'sync_random_seed', lambda: 5)
    per_rank = []
    for rank in range(2):
        monkeypatch.setattr(module, 'get_dist_info', lambda r=rank: (r, 2))
        per_rank.append(loader_batches(1037, None, 64))
    assert len(per_rank[0]) == len(per_rank[1]) == (3 * 1037 // 2) // 64
    for b0, b1, want in zip(*per_rank, original_batches(1037, 5, 128)):
        assert [i for pair in zip(b0, b1) for i in pair] == want


def test_epochs_differ_and_repeat_with_the_seed():
    s = MultiPassSampler(range(50), seed=7)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first
    s.set_epoch(0)
    assert list(s) == first
