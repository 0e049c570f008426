"""Digits: the split, upsampling at load giving the bytes the Resize
transform gives, a batch made at once giving the samples one by one, and
the digit placed on a larger canvas (in the middle, or at a place fixed
per image)."""
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


@pytest.mark.parametrize('pipeline,canvas', [
    ([CROP, PACK], {}), ([PACK], {}),  # the demo's pipelines: batched
    ([dict(CROP, crop_size=(14, 15), padding=None), PACK], {}),  # batched
    # on a canvas, places fixed per image (test_random_places_...): batched
    ([dict(CROP, crop_size=20, padding=2), PACK],
     dict(canvas=20, placement='random')),
    # not batched: a transform, an option the batch path does not follow
    ([CROP, dict(type='RandomFlip', prob=0.5), PACK], {}),
    ([dict(CROP, pad_if_needed=True, crop_size=20), PACK], {}),
])
def test_a_batch_is_the_samples_one_by_one(pipeline, canvas):
    """``__getitems__`` (what DataLoader calls with a batch's indices) gives
    the samples and the ``np.random`` draws of the per-sample pipeline."""
    from mmengine.registry import init_default_scope
    init_default_scope('mmpretrain')
    dataset = Digits(split='train', scale=16, serialize_data=False,
                     pipeline=pipeline, **canvas)
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


def _build(**kwargs):
    """A Digits from a config dict, as a dataloader builds it."""
    from mmpretrain.registry import DATASETS
    return DATASETS.build(dict(type='Digits', serialize_data=False, **kwargs))


@pytest.mark.parametrize('scale,canvas', [(None, 16), (16, (31, 24))])
def test_canvas_holds_the_digit_alone_in_the_middle(scale, canvas):
    """The image is the canvas, blank but for the (scaled) digit, whose
    box is the canvas's middle; the label is the digit's."""
    plain = _build(split='test', scale=scale)
    placed = _build(split='test', scale=scale, canvas=canvas)
    w, h = (canvas, canvas) if isinstance(canvas, int) else canvas
    dh, dw = plain.get_data_info(0)['img'].shape[:2]
    x, y = (w - dw) // 2, (h - dh) // 2
    assert len(placed) == len(plain) == 360
    for i in range(len(placed)):
        got, want = placed.get_data_info(i), plain.get_data_info(i)
        assert got['gt_label'] == want['gt_label']
        assert got['digit_box'] == (x, y, x + dw, y + dh)
        img = got['img'].copy()
        assert img.shape == (h, w, 3) and img.dtype == np.uint8
        assert np.array_equal(img[y:y + dh, x:x + dw], want['img'])
        img[y:y + dh, x:x + dw] = 0
        assert not img.any()


def _placed(**kwargs):
    """Every image of both splits as ``(digit bytes, label, box)`` (a
    multiset: the dataset has repeated images)."""
    out = Counter()
    for split in ('train', 'test'):
        for info in _build(split=split, **kwargs).data_list:
            x1, y1, x2, y2 = info['digit_box']
            out[(info['img'][y1:y2, x1:x2].tobytes(), info['gt_label'],
                 info['digit_box'])] += 1
    return out


def test_random_places_are_fixed_per_image_and_within_max_shift():
    """``placement='random'`` gives each image one place, whatever the
    split, the build and the global ``np.random`` state; within
    ``max_shift`` of the middle, and varied; another seed, other places."""
    options = dict(canvas=16, placement='random', max_shift=3)
    np.random.seed(0)
    first = _placed(**options)
    state = np.random.get_state()[1].copy()
    np.random.seed(1)
    # another split of the same images, another global state
    assert _placed(split_seed=1, **options) == first
    np.random.seed(0)
    _placed(**options)
    assert np.array_equal(np.random.get_state()[1], state)  # no draw
    assert sum(first.values()) == 1797
    corners = Counter(box[:2] for _, _, box in first.elements())
    # the 8x8 digit's middle place on 16 px is (4, 4): 1..7 per axis
    assert set(corners) == {(x, y) for x in range(1, 8)
                            for y in range(1, 8)}
    assert max(corners.values()) < 1797 / 49 * 1.5  # about uniform
    other = _placed(placement_seed=1, **options)
    assert other != first
    assert Counter((d, y) for d, y, _ in other.elements()) == \
        Counter((d, y) for d, y, _ in first.elements())


def test_random_places_without_max_shift_cover_the_canvas():
    boxes = {info['digit_box'] for info in _build(
        split='train', scale=(12, 8), canvas=(16, 10),
        placement='random').data_list}
    assert {b[:2] for b in boxes} == {(x, y) for x in range(5)
                                      for y in range(3)}
    assert {(b[2] - b[0], b[3] - b[1]) for b in boxes} == {(12, 8)}
