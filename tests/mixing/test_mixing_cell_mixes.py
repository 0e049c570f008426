"""Token-aligned CutMix, random patch mixing, block-wise mixing, and what
every recording augment must do."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import CutMix

from tlalign_mm.mixing import (
    TLBlockMix,
    TLCutMix,
    TLMixup,
    TLPatchMix,
    TLResizeMix,
    TLTokenCutMix,
)
from tlalign_mm.mixing.grid import (
    cell_boundaries,
    cells_to_pixels,
    grid_shape,
    snap_to_boundary,
)

from .conftest import random_batch

SEEDS = range(8)
# (batch size, H, W): odd batch, batch of one, sizes not multiples of 16.
SHAPES = [(5, 64, 80), (1, 48, 48), (3, 40, 56), (2, 21, 35)]


def _batch(batch_size, img_h, img_w, dtype=torch.float32, num_classes=6):
    return random_batch(batch_size, img_h, img_w,
                        99 + batch_size * img_w, dtype, num_classes)


def _replaced_cells(record, patch_size, cell_min_max):
    """Per-cell weight of source 1 (asserting each cell is uniform)."""
    cmin, cmax = cell_min_max(record.pixel_weights[:, 1], patch_size)
    assert torch.equal(cmin, cmax), 'a cell mixes two sources'
    assert set(cmin.unique().tolist()) <= {0., 1.}
    # One mask per batch.
    assert bool((cmin == cmin[:1]).all())
    return cmin[0]


# ----------------------------------------------------------------- grid ---
def test_grid_helpers():
    assert grid_shape((224, 224), 16) == (14, 14)
    assert grid_shape((40, 56), 16) == (3, 4)
    assert cell_boundaries(48, 16).tolist() == [0, 16, 32, 48]
    assert cell_boundaries(20, 16).tolist() == [0, 16, 20]
    assert snap_to_boundary(9, 224, 16) == 16
    assert snap_to_boundary(7, 224, 16) == 0
    assert snap_to_boundary(8, 224, 16) == 0  # tie -> lower
    assert snap_to_boundary(-3, 224, 16) == 0
    assert snap_to_boundary(230, 224, 16) == 224
    # Partial last cell [16, 20): its end is the image border.
    assert snap_to_boundary(19, 20, 16) == 20
    assert snap_to_boundary(17, 20, 16) == 16
    cells = torch.tensor([[True, False], [False, True]])
    pixels = cells_to_pixels(cells, (20, 30), 16)
    assert pixels.shape == (20, 30)
    assert bool(pixels[:16, :16].all()) and not bool(pixels[:16, 16:].any())
    assert bool(pixels[16:, 16:].all()) and not bool(pixels[16:, :16].any())
    with pytest.raises(AssertionError):
        cells_to_pixels(cells, (40, 30), 16)


# ---------------------------------------------------------- every augment ---
ALL_AUGS = [
    (lambda: TLCutMix(alpha=1.0), True),
    (lambda: TLMixup(alpha=0.8), False),
    (lambda: TLResizeMix(alpha=1.0), True),
    (lambda: TLTokenCutMix(alpha=1.0, patch_size=16), True),
    (lambda: TLPatchMix(alpha=1.0), True),
    (lambda: TLBlockMix(alpha=1.0, min_num_patches=2), True),
]


@pytest.mark.parametrize(
    'make_aug,exact',
    ALL_AUGS,
    ids=['cutmix', 'mixup', 'resizemix', 'tokencutmix', 'patchmix',
         'blockmix'])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8])
def test_every_augment_records_faithfully(make_aug, exact, shape, dtype, seed,
                                          check_record, resized_sources):
    aug = make_aug()
    inputs, scores = _batch(*shape, dtype=dtype)
    for s in SEEDS[:4]:
        seed(s)
        before = inputs.clone()
        mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
        assert torch.equal(inputs, before), 'inputs modified in place'
        assert mixed.shape == inputs.shape
        if exact:  # hard mixes keep the dtype (as mmpretrain's CutMix)
            assert mixed.dtype == inputs.dtype
        assert mixed_scores.dtype == torch.float32
        # ResizeMix pastes its partner resized, not in place.
        sources = resized_sources(record, inputs, aug.interpolation) \
            if isinstance(aug, TLResizeMix) else None
        check_record(
            record,
            inputs,
            scores,
            mixed,
            mixed_scores,
            exact_pixels=exact,
            area_is_cls=True,
            sources=sources)
        if shape[0] == 1:  # the permutation of one is the identity
            assert record.source_index.tolist() == [[0, 0]]
        else:
            assert sorted(record.source_index[:, 1].tolist()) == list(
                range(shape[0]))
        # ``mix`` / ``__call__`` (the drop-in path) make the same mix.
        seed(s)
        call_inputs, call_scores = aug(inputs.clone(), scores)
        assert torch.equal(call_inputs, mixed)
        assert torch.equal(call_scores, mixed_scores)


# ------------------------------------------------------------ TokenCutMix ---
@pytest.mark.parametrize('shape', [(4, 224, 224), (3, 40, 56), (2, 21, 35)])
def test_token_cutmix_snaps_cutmix_box(shape, seed, cell_min_max):
    batch_size, img_h, img_w = shape
    inputs, scores = _batch(*shape)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16)
    ref = CutMix(alpha=1.0)
    boxes = 0
    for s in range(20):
        # The draws of mmpretrain's CutMix, then the nearest boundaries.
        seed(s)
        lam = np.random.beta(1.0, 1.0)
        index = torch.randperm(batch_size)
        (y1, y2, x1, x2), _ = ref.cutmix_bbox_and_lam((img_h, img_w), lam)
        ys, xs = cell_boundaries(img_h, 16), cell_boundaries(img_w, 16)
        snap = lambda v, b: int(b[np.argmin(np.abs(b - v))])  # noqa: E731
        y1, y2, x1, x2 = snap(y1, ys), snap(y2, ys), snap(x1, xs), snap(x2, xs)
        expected = torch.zeros(img_h, img_w)
        expected[y1:y2, x1:x2] = 1

        seed(s)
        _, mixed_scores, record = aug.mix_with_record(inputs, scores)
        assert torch.equal(record.source_index[:, 1], index)
        assert torch.equal(record.pixel_weights[0, 1], expected)
        kept = 1 - (y2 - y1) * (x2 - x1) / (img_h * img_w)
        assert record.area_share[0, 0].item() == pytest.approx(kept)
        cells = _replaced_cells(record, 16, cell_min_max)
        boxes += bool(cells.any())
    assert boxes > 0, 'no seed produced a box: the test checks nothing'


def test_token_cutmix_only_whole_patches(seed, cell_min_max):
    """Unlike TLCutMix, no 16x16 patch gets a fractional weight."""
    inputs, scores = _batch(2, 224, 224)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16)
    for s in SEEDS:
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        pooled = F.avg_pool2d(record.pixel_weights, 16)
        assert set(pooled.unique().tolist()) <= {0., 1.}
    # The same seed-0 box of TLCutMix does cut through patches.
    seed(0)
    _, _, record = TLCutMix(alpha=1.0).mix_with_record(inputs, scores)
    pooled = F.avg_pool2d(record.pixel_weights, 16)
    assert not set(pooled.unique().tolist()) <= {0., 1.}


# ------------------------------------------------------------- PatchMix ---
@pytest.mark.parametrize('shape,patch_size', [((3, 64, 80), 16),
                                              ((2, 40, 56), 16),
                                              ((1, 224, 224), 16),
                                              ((2, 30, 30), 8)])
def test_patch_mix_replaces_round_share_of_cells(shape, patch_size, seed,
                                                 cell_min_max):
    inputs, scores = _batch(*shape)
    aug = TLPatchMix(alpha=1.0, patch_size=patch_size)
    rows, cols = grid_shape(shape[-2:], patch_size)
    num_cells = rows * cols
    masks = []
    for s in SEEDS:
        seed(s)
        lam0 = np.random.beta(1.0, 1.0)
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        cells = _replaced_cells(record, patch_size, cell_min_max)
        assert cells.shape == (rows, cols)
        assert int(cells.sum()) == int(np.floor((1 - lam0) * num_cells + .5))
        masks.append(cells)
    # Cells are random, not a fixed prefix of the grid.
    nonempty = [m for m in masks if 0 < m.sum() < num_cells]
    assert nonempty and any(
        not torch.equal(m.flatten().sort(descending=True)[0], m.flatten())
        for m in nonempty)


# ------------------------------------------------------------- BlockMix ---
def test_block_mix_places_rectangles():
    aug = TLBlockMix(alpha=1.0, min_num_patches=4)
    np.random.seed(0)
    for _ in range(20):
        mask = np.zeros((14, 14), dtype=bool)
        num_new = aug._place_block(mask, 30)
        assert 4 <= num_new <= 30 and num_new == mask.sum()
        rows, cols = np.nonzero(mask)
        h = rows.max() - rows.min() + 1
        w = cols.max() - cols.min() + 1
        assert h * w == num_new, 'not one rectangle'
        assert 0.3 / 2 <= h / w <= 2 / 0.3


def test_block_mix_reaches_about_the_target(seed, cell_min_max):
    inputs, scores = _batch(2, 224, 224)
    aug = TLBlockMix(alpha=1.0)
    total_target = total_replaced = 0
    for s in range(12):
        seed(s)
        lam0 = np.random.beta(1.0, 1.0)
        target = int(np.floor((1 - lam0) * 196 + 0.5))
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        cells = _replaced_cells(record, 16, cell_min_max)
        replaced = int(cells.sum())
        assert replaced <= target
        total_target += target
        total_replaced += replaced
        assert record.area_share[0, 1].item() == pytest.approx(
            replaced / 196, abs=1e-6)
    assert total_replaced >= 0.9 * total_target


def test_block_mix_blocks_are_blocky():
    """Block masks are far more clustered than random patch masks."""

    def neighbours(mask):  # replaced cells with a replaced right/down cell
        return int((mask[:, 1:] & mask[:, :-1]).sum() +
                   (mask[1:] & mask[:-1]).sum())

    np.random.seed(0)
    count = round(0.3 * 196)
    block = TLBlockMix(alpha=1.0).sample_cell_mask((14, 14), count)
    patch = TLPatchMix(alpha=1.0).sample_cell_mask((14, 14), count)
    assert 0.2 * 196 <= block.sum() <= patch.sum() == count
    assert neighbours(block) > 1.5 * neighbours(patch)


def test_block_mix_too_small_grid_does_not_mix(seed, check_record):
    """A 1-cell grid cannot hold a 4-cell block: nothing is mixed."""
    inputs, scores = _batch(3, 16, 16)
    seed(0)
    mixed, mixed_scores, record = TLBlockMix(alpha=1.0).mix_with_record(
        inputs, scores)
    assert torch.equal(mixed, inputs)
    assert torch.equal(mixed_scores, scores.float())
    assert record.area_share[:, 0].tolist() == [1., 1., 1.]
    check_record(record, inputs, scores, mixed, mixed_scores)


def test_block_mix_aspect_arg():
    aug = TLBlockMix(alpha=1.0, min_aspect=0.5)
    assert aug.log_aspect_ratio == pytest.approx(
        (math.log(0.5), math.log(2.0)))
    with pytest.raises(ValueError, match='max_num_patches'):
        TLBlockMix(alpha=1.0, min_num_patches=8, max_num_patches=4)
