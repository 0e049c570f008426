"""Digits: the split, and upsampling at load giving the bytes the Resize
transform gives."""
from collections import Counter

import numpy as np
import pytest
from mmcv.transforms import Resize

from tlalign_mm.datasets import Digits


def _samples(dataset):
    """Each sample as (image bytes, label)."""
    infos = (dataset.get_data_info(i) for i in range(len(dataset)))
    return Counter((info['img'][..., 0].tobytes(), int(info['gt_label']))
                   for info in infos)


def test_split_is_disjoint_and_complete():
    from sklearn.datasets import load_digits
    train, test = Digits(split='train'), Digits(split='test')
    assert (len(train), len(test)) == (1437, 360)
    assert train.get_data_info(0)['img'].shape == (8, 8, 3)
    digits = load_digits()
    images = np.round(digits.images * (255 / 16)).astype(np.uint8)
    everything = Counter((img.tobytes(), int(y))
                         for img, y in zip(images, digits.target))
    # as multisets: every sample in exactly one split (a sample in both, or
    # in neither, changes the sum)
    assert _samples(train) + _samples(test) == everything


def test_scale_at_load_equals_the_resize_transform():
    native = Digits(split='test')
    scaled = Digits(split='test', scale=16, serialize_data=False)
    resize = Resize(scale=(16, 16), interpolation='bilinear')
    for i in range(0, len(native), 37):
        expected = resize(dict(img=native.get_data_info(i)['img']))['img']
        got = scaled.get_data_info(i)['img']
        assert got.shape == (16, 16, 3) and got.dtype == np.uint8
        assert np.array_equal(got, expected)
        assert scaled.get_data_info(i)['gt_label'] == \
            native.get_data_info(i)['gt_label']


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match='split'):
        Digits(split='val')
    with pytest.raises(ValueError, match='scale'):
        Digits(scale=(16, ))
    with pytest.raises(ValueError, match='scale'):
        Digits(scale=0)
