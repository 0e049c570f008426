"""MultiPassSampler: the SPT/LSA epoch of three shuffled passes, against a
verbatim port of the original RASampler."""
import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope
from mmengine.runner import Runner

from tlalign_mm.datasets import MultiPassSampler
from tlalign_mm.datasets import multi_pass_sampler as module


class OriginalRASampler(torch.utils.data.Sampler):
    """aanna0701/SPT_LSA_ViT@54bd796 utils/sampler.py:14-63, verbatim."""

    def __init__(self, dataset_len, batch_size, repetitions=1, len_factor=3.0,
                 shuffle=False, drop_last=False):
        self.dataset_len = dataset_len
        self.batch_size = batch_size
        self.repetitions = repetitions
        self.len_images = int(dataset_len * len_factor)
        self.shuffle = shuffle
        self.drop_last = drop_last

    def shuffler(self):
        if self.shuffle:
            def new_perm():
                return iter(np.random.permutation(self.dataset_len))
        else:
            def new_perm():
                return iter(np.arange(self.dataset_len))
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

    def __len__(self):
        if self.drop_last:
            return self.len_images // self.batch_size
        else:
            return (self.len_images + self.batch_size - 1) // self.batch_size


class Indices(torch.utils.data.Dataset):

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def original_batches(n, seed, batch_size=128):
    np.random.seed(seed)
    return list(OriginalRASampler(n, batch_size, 1, 3, shuffle=True,
                                  drop_last=True))


def loader(n, seed, batch_size=128):
    """Built as a config builds it (mmengine's Runner.build_dataloader)."""
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return Runner.build_dataloader(
            dict(batch_size=batch_size, num_workers=0, drop_last=True,
                 dataset=Indices(n),
                 sampler=dict(type='MultiPassSampler', num_passes=3)),
            seed=seed)


@pytest.mark.parametrize('n', [1000, 1037])
def test_epoch_is_three_passes_cut_into_full_batches(n):
    batches = [list(b) for b in loader(n, seed=3)]
    assert len(batches) == (3 * n) // 128
    assert all(len(b) == 128 for b in batches)
    stream = np.concatenate(batches)
    for p in range(3):
        one_pass = stream[p * n:(p + 1) * n]
        # each image once per pass (the dropped partial batch aside)
        assert len(set(one_pass.tolist())) == len(one_pass)
        if len(one_pass) == n:
            assert sorted(one_pass.tolist()) == list(range(n))


@pytest.mark.parametrize('n, seed', [(1000, 0), (1037, 12345)])
def test_stream_equals_the_original_rasampler(n, seed):
    ours = [list(b) for b in loader(n, seed=seed)]
    assert ours == [[int(i) for i in b] for b in original_batches(n, seed)]


def test_epochs_differ_and_repeat_with_the_seed():
    s = MultiPassSampler(Indices(50), seed=7)
    first = list(s)
    s.set_epoch(1)
    second = list(s)
    assert first != second
    s.set_epoch(0)
    assert list(s) == first


def test_two_ranks_cover_the_same_stream(monkeypatch):
    n, batch, seed = 1037, 64, 5
    per_rank = []
    for rank in range(2):
        monkeypatch.setattr(module, 'get_dist_info', lambda r=rank: (r, 2))
        per_rank.append([list(b) for b in loader(n, seed, batch)])
    assert len(per_rank[0]) == len(per_rank[1]) == (3 * n // 2) // batch
    # one step's two batches are the original's batch of 2 x 64 indices
    expected = original_batches(n, seed, batch_size=2 * batch)
    for step, (b0, b1) in enumerate(zip(*per_rank)):
        merged = np.empty(2 * batch, dtype=int)
        merged[0::2], merged[1::2] = b0, b1
        assert merged.tolist() == [int(i) for i in expected[step]]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match='num_passes'):
        MultiPassSampler(Indices(10), num_passes=0, seed=0)
    with pytest.raises(ValueError, match='empty'):
        MultiPassSampler(Indices(0), seed=0)


def _rank_stream(rank, world, port, queue):
    import torch.distributed as dist
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}',
                            rank=rank, world_size=world)
    sampler = MultiPassSampler(Indices(1037), seed=None)  # synced seed
    sampler.set_epoch(2)
    queue.put((rank, sampler.seed, list(sampler)))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.e2e
def test_two_gloo_ranks_cover_the_same_stream():
    """Two real processes: the synced seed is the same, and the ranks'
    indices interleave into the one-process stream of that epoch."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    ctx = mp.get_context('spawn')
    queue = ctx.Queue()
    procs = [ctx.Process(target=_rank_stream, args=(r, 2, port, queue))
             for r in range(2)]
    for p in procs:
        p.start()
    got = {r: (seed, idx) for r, seed, idx in
           [queue.get(timeout=120) for _ in procs]}
    for p in procs:
        p.join(timeout=60)
    (seed0, first), (seed1, second) = got[0], got[1]
    assert seed0 == seed1 and len(first) == len(second) == 3 * 1037 // 2
    merged = np.empty(2 * len(first), dtype=int)
    merged[0::2], merged[1::2] = first, second
    stream = module.multi_pass_indices(1037, 3,
                                       np.random.RandomState(seed0 + 2))
    assert merged.tolist() == stream[:len(merged)].tolist()
