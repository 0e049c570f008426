"""TLTokenCutMix: the official token-unit box (TL-Align's ``rand_token_bbox``),
mmpretrain's CutMix box snapped to the patch grid, and the patch size taken
from the model."""
import numpy as np
import pytest
import torch
from mmpretrain.models.utils.batch_augments import CutMix
from mmpretrain.registry import MODELS

from tlalign_mm.mixing import TLTokenCutMix

from .conftest import random_batch, seed


@pytest.mark.parametrize('units,shape,patch', [
    ('tokens', (3, 28, 28), 2), ('tokens', (3, 40, 56), 16),
    ('pixels', (4, 64, 64), 16), ('pixels', (3, 40, 56), 16),
    ('pixels', (2, 21, 35), 16)])
def test_box_from_the_real_draws(units, shape, patch):
    """numpy's beta, torch's permutation, then the box. Token units: numpy's
    two randint calls, with the official formula written out here: side
    int(rows * sqrt(1 - lam)), corners centre -/+ side // 2 clipped to the
    grid (so lam 0.5 on 14 rows is a box of 8, not 9; a side under 2 an
    empty box). Pixel units (the default): mmpretrain's CutMix box, each
    edge at the nearest cell boundary (ties to the lower; the image border
    closes a partial cell): whole patches only. A partial last row / column
    of cells (40x56, 21x35) is clipped to the image (the area share
    counting pixels: RA's token-units case)."""
    batch_size, img_h, img_w = shape
    rows, cols = -(-img_h // patch), -(-img_w // patch)
    inputs, scores = random_batch(*shape)
    aug = TLTokenCutMix(alpha=1.0, patch_size=patch, box_units=units)
    clipped = empty = 0
    for s in range(60 if units == 'tokens' else 12):
        seed(s)
        lam, index = np.random.beta(1.0, 1.0), torch.randperm(batch_size)
        if units == 'tokens':
            cut_h, cut_w = int(rows * np.sqrt(1 - lam)), int(
                cols * np.sqrt(1 - lam))
            cy, cx = np.random.randint(0, rows), np.random.randint(0, cols)
            y1, y2 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, rows)
            x1, x2 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, cols)
            y1, y2, x1, x2 = (patch * v for v in (y1, y2, x1, x2))
            clipped += cy - cut_h // 2 < 0 or cy + cut_h // 2 > rows
        else:
            box, _ = CutMix(1.0).cutmix_bbox_and_lam(shape[1:], lam)
            ys, xs = (np.unique(np.r_[np.arange(0, n, patch), n])
                      for n in (img_h, img_w))
            y1, y2, x1, x2 = (int(b[np.argmin(np.abs(b - v))])
                              for v, b in zip(box, (ys, ys, xs, xs)))
        mask = torch.zeros(img_h, img_w)
        mask[y1:y2, x1:x2] = 1
        seed(s)
        record = aug.mix_with_record(inputs, scores)[2]
        assert torch.equal(record.pixel_weights[:, 1],
                           mask.expand(batch_size, -1, -1))
        assert torch.equal(record.source_index[:, 1], index)
        empty += y1 == y2 or x1 == x2
    assert empty < s and (units == 'pixels' or clipped and empty), \
        'the seeds miss a case: the test checks less'


VIT4 = dict(type='VisionTransformer', img_size=16, patch_size=4, arch=dict(
    embed_dims=16, num_layers=1, num_heads=2, feedforward_channels=16))


@pytest.mark.parametrize('patch_size', [None, 4, 16])
def test_patch_size_comes_from_the_model(patch_size):
    """Issue 17: 16-pixel cells on a patch-4 model at 16x16 pixels swap the
    whole image or nothing (lam in {0, 1}): a patch size that differs from
    the model's fails the build."""
    aug = dict(type='TLTokenCutMix', alpha=1.0, box_units='tokens',
               **({} if patch_size is None else dict(patch_size=patch_size)))
    cfg = dict(type='TLAlignClassifier', backbone=VIT4, head=dict(
        type='VisionTransformerClsHead', num_classes=5, in_channels=16),
        data_preprocessor=dict(num_classes=5), train_cfg=dict(augments=[aug]))
    if patch_size == 16:
        with pytest.raises(ValueError, match=r'patch_size=16.*4x4 patches '
                           'of VisionTransformer'):
            MODELS.build(cfg)
        return
    assert MODELS.build(cfg).data_preprocessor.batch_augments.augments[
        0].patch_size == 4
    with pytest.raises(ValueError, match='takes the patch size of the model'):
        TLTokenCutMix(alpha=1.0).mix_with_record(*random_batch(2, 32, 32))
