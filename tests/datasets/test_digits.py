"""Digits: the split, upsampling at load giving the bytes the Resize
transform gives, and a batch made at once giving the samples one by one."""
from collections import Counter

import numpy as np
import pytest
import torch
from mmcv.transforms import Resize

from tlalign_mm.datasets import Digits


def test_split_is_disjoint_and_complete():
    from sklearn.datasets import load_digits
    digits = load_digits()
    everything = Counter((img.tobytes(), int(y)) for img, y in zip(np.round(
        digits.images * (255 / 16)).astype(np.uint8), digits.target))
    splits = [Counter((d.get_data_info(i)['img'][..., 0].tobytes(),
                       int(d.get_data_info(i)['gt_label']))
                      for i in range(len(d))) for d in (
        Digits(split=s, serialize_data=False) for s in ('train', 'test'))]
    assert [sum(s.values()) for s in splits] == [1437, 360]
    # as multisets: every sample in exactly one split (a sample in both, or
    # in neither, changes the sum)
    assert splits[0] + splits[1] == everything


def test_scale_at_load_equals_the_resize_transform():
    native = Digits(split='test', serialize_data=False)
    scaled = Digits(split='test', scale=16, serialize_data=False)
    resize = Resize(scale=(16, 16), interpolation='bilinear')
    for i in range(0, len(native), 37):
        got, want = scaled.get_data_info(i), native.get_data_info(i)
        assert got['img'].shape == (16, 16, 3) and got['img'].dtype == np.uint8
        assert np.array_equal(got['img'], resize(dict(img=want['img']))['img'])
        assert got['gt_label'] == want['gt_label']


CROP = dict(type='RandomCrop', crop_size=16, padding=1)
PACK = dict(type='PackInputs')


@pytest.mark.parametrize('pipeline', [
    [CROP, PACK], [PACK],  # the demo's training and test pipelines: batched
    [dict(CROP, crop_size=(14, 15), padding=None), PACK],  # batched
    # not batched: a transform, an option the batch path does not follow
    [CROP, dict(type='RandomFlip', prob=0.5), PACK],
    [dict(CROP, pad_if_needed=True, crop_size=20), PACK],
])
def test_a_batch_is_the_samples_one_by_one(pipeline):
    """``__getitems__`` (what DataLoader calls with a batch's indices) gives
    the samples and the ``np.random`` draws of the per-sample pipeline."""
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    dataset = Digits(split='train', scale=16, serialize_data=False,
                     pipeline=pipeline)
    indices = [5, 1400, 5, 0, 77, -1] + list(range(200, 264))
    np.random.seed(3)
    expected = [dataset[i] for i in indices]
    after = np.random.get_state()[1].copy()
    np.random.seed(3)
    got = dataset.__getitems__(indices)
    assert np.array_equal(np.random.get_state()[1], after)
    assert len(got) == len(expected) == 70
    for ours, theirs in zip(got, expected):
        assert ours['inputs'].dtype == theirs['inputs'].dtype == torch.uint8
        assert torch.equal(ours['inputs'], theirs['inputs'])
        a, b = ours['data_samples'], theirs['data_samples']
        assert a.metainfo == b.metainfo and a.keys() == b.keys()
        assert torch.equal(a.gt_label, b.gt_label)
