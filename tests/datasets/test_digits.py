"""Digits: the split, and upsampling at load giving the bytes the Resize
transform gives."""
import numpy as np
import pytest
from mmcv.transforms import Resize

from tlalign_mm.datasets import Digits


def test_split_is_disjoint_and_complete():
    train, test = Digits(split='train'), Digits(split='test')
    assert (len(train), len(test)) == (1437, 360)
    assert len(train) + len(test) == 1797
    assert train.get_data_info(0)['img'].shape == (8, 8, 3)


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
