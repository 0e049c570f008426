"""TLTokenCutMix: the official token-unit box (TL-Align's ``rand_token_bbox``),
mmpretrain's CutMix box snapped to the patch grid, and the patch size taken
from the model."""
import numpy as np
import pytest
import torch
from mmpretrain.models.utils.batch_augments import CutMix
from mmpretrain.registry import MODELS

from tlalign_mm.mixing import TLTokenCutMix
from tlalign_mm.mixing.token_cutmix import token_box

from .conftest import random_batch, replaced_cells, seed

# Hand-computed cases of the official rule on a 14x14 grid: side
# int(14 * sqrt(1 - lam)), corners centre -/+ side // 2 clipped to [0, 14].
HAND = [
    # lam 0.75: side 7, half 3; rows [0, 6), cols [9, 15) -> [9, 14).
    (0.75, (3, 12), (0, 6, 9, 14)),
    # lam 0.5: side int(9.899) = 9, half 4 (the box is 8 tokens, not 9).
    (0.5, (7, 7), (3, 11, 3, 11)),
    # lam 0.99: side int(1.4) = 1, half 0: an empty box, nothing mixed.
    (0.99, (5, 9), (5, 5, 9, 9)),
]


@pytest.mark.parametrize('lam,centre,box', HAND)
def test_token_box_is_the_official_rule_by_hand(monkeypatch, lam, centre,
                                                box):
    calls, centre = [], list(centre)

    def randint(low, high=None, size=None):
        calls.append((low, high))
        return centre.pop(0)

    monkeypatch.setattr(np.random, 'randint', randint)
    assert token_box((14, 14), lam) == box
    assert calls == [(0, 14), (0, 14)]  # randint(0, rows), randint(0, cols)


@pytest.mark.parametrize('img,patch', [((28, 28), 2), ((40, 56), 16)])
def test_token_box_from_the_real_draws(img, patch):
    """numpy's beta, torch's permutation, then numpy's two randint calls,
    with the formula written out here; a partial last row / column of
    cells (40x56, patch 16) is clipped to the image and lam counts
    pixels."""
    (img_h, img_w), rows, cols = img, -(-img[0] // patch), -(-img[1] // patch)
    inputs, scores = random_batch(3, *img)
    aug = TLTokenCutMix(alpha=1.0, patch_size=patch, box_units='tokens')
    clipped = 0
    for s in range(40):
        seed(s)
        lam = np.random.beta(1.0, 1.0)
        index = torch.randperm(3)
        ratio = np.sqrt(1 - lam)
        cut_h, cut_w = int(rows * ratio), int(cols * ratio)
        cy, cx = np.random.randint(0, rows), np.random.randint(0, cols)
        y1, y2 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, rows)
        x1, x2 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, cols)
        mask = torch.zeros(img_h, img_w)
        mask[y1 * patch:y2 * patch, x1 * patch:x2 * patch] = 1
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        assert torch.equal(record.pixel_weights[:, 1], mask.expand(3, -1, -1))
        assert torch.equal(record.source_index[:, 1], index)
        clipped += cy - cut_h // 2 < 0 or cy + cut_h // 2 > rows
    assert clipped, 'no seed clipped a box: the test checks less'


@pytest.mark.parametrize('shape', [(4, 64, 64), (3, 40, 56), (2, 21, 35)])
def test_pixel_units_snap_cutmix_box(shape):
    """The default box: mmpretrain's CutMix draws, then each edge at the
    nearest cell boundary (ties to the lower; the image border closes a
    partial cell): whole patches only."""
    batch_size, img_h, img_w = shape
    inputs, scores = random_batch(*shape)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16)
    boxes = 0
    for s in range(12):
        seed(s)
        lam = np.random.beta(1.0, 1.0)
        index = torch.randperm(batch_size)
        (y1, y2, x1, x2), _ = CutMix(1.0).cutmix_bbox_and_lam(shape[1:], lam)
        ys, xs = (np.unique(np.r_[np.arange(0, n, 16), n])
                  for n in (img_h, img_w))
        y1, y2, x1, x2 = (int(b[np.argmin(np.abs(b - v))]) for v, b in
                          ((y1, ys), (y2, ys), (x1, xs), (x2, xs)))
        expected = torch.zeros(img_h, img_w)
        expected[y1:y2, x1:x2] = 1
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        assert torch.equal(record.source_index[:, 1], index)
        assert torch.equal(record.pixel_weights[0, 1], expected)
        boxes += bool(replaced_cells(record, 16).any())
    assert boxes > 0, 'no seed produced a box: the test checks nothing'


ARCH = dict(embed_dims=16, num_layers=1, num_heads=2, feedforward_channels=16)
VIT4 = dict(type='VisionTransformer', arch=ARCH, img_size=16, patch_size=4)


@pytest.mark.parametrize('patch_size', [None, 4, 16])
def test_patch_size_comes_from_the_model(patch_size):
    """Issue 17: 16-pixel cells on a patch-4 model at 16x16 pixels swap the
    whole image or nothing (lam in {0, 1}): a patch size that differs from
    the model's fails the build."""
    aug = dict(type='TLTokenCutMix', alpha=1.0, box_units='tokens',
               **({} if patch_size is None else dict(patch_size=patch_size)))
    cfg = dict(type='TLAlignClassifier', backbone=VIT4,
               head=dict(type='VisionTransformerClsHead', num_classes=5,
                         in_channels=16),
               data_preprocessor=dict(num_classes=5),
               train_cfg=dict(augments=[aug]))
    if patch_size == 16:
        with pytest.raises(ValueError, match=r'patch_size=16.*4x4 patches '
                           'of VisionTransformer'):
            MODELS.build(cfg)
        return
    model = MODELS.build(cfg)
    assert model.data_preprocessor.batch_augments.augments[0].patch_size == 4
    with pytest.raises(ValueError, match='takes the patch size of the model'):
        TLTokenCutMix(alpha=1.0).mix_with_record(*random_batch(2, 32, 32))
