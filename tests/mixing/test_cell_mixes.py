"""Random patch mixing and block-wise mixing: whole cells of the patch grid,
as many as the drawn lambda asks (blocks: about as many)."""
import numpy as np
import pytest
import torch

from tlalign_mm.mixing import TLBlockMix, TLPatchMix

from .conftest import random_batch, replaced_cells, seed


@pytest.mark.parametrize('mix,shape,patch_size', [
    (TLPatchMix, (3, 40, 56), 16), (TLPatchMix, (2, 30, 30), 8),
    (TLBlockMix, (2, 28, 28), 2)])
def test_replaces_the_drawn_share_of_cells(mix, shape, patch_size):
    """Patch mixing: round((1 - lam) * cells) cells, random ones (not a fixed
    prefix of the grid); block mixing: at most that, and over 12 seeds at
    least 90% of it."""
    inputs, scores = random_batch(*shape)
    aug = mix(alpha=1.0, patch_size=patch_size)
    rows, cols = -(-shape[1] // patch_size), -(-shape[2] // patch_size)
    masks, targets = [], []
    for s in range(12):
        seed(s)
        targets.append(np.floor((1 - np.random.beta(1., 1.)) * rows * cols
                                + .5))
        seed(s)
        masks.append(replaced_cells(aug.mix_with_record(inputs, scores)[2],
                                    patch_size))
    assert {m.shape for m in masks} == {(rows, cols)}
    masks, got = [m.flatten() for m in masks], [int(m.sum()) for m in masks]
    if mix is TLBlockMix:
        assert all(g <= t for g, t in zip(got, targets))
        assert sum(got) >= 0.9 * sum(targets)
    else:
        assert got == targets
        assert any(not torch.equal(m.sort(descending=True)[0], m)
                   for m in masks)


def test_block_mix_places_rectangles():
    aug = TLBlockMix(alpha=1.0, min_num_patches=4)
    np.random.seed(0)
    for _ in range(20):
        mask = np.zeros((14, 14), dtype=bool)
        num_new = aug._place_block(mask, 30)
        assert 4 <= num_new <= 30 and num_new == mask.sum()
        rows, cols = np.nonzero(mask)
        h, w = np.ptp(rows) + 1, np.ptp(cols) + 1
        assert h * w == num_new, 'not one rectangle'
        assert 0.3 / 2 <= h / w <= 2 / 0.3  # the aspect range, rounded


def test_block_mix_blocks_are_blocky():
    """Block masks are far more clustered than random patch masks."""

    def neighbours(mask):  # replaced cells with a replaced right/down cell
        return int((mask[:, 1:] & mask[:, :-1]).sum() +
                   (mask[1:] & mask[:-1]).sum())

    np.random.seed(0)
    block, patch = (mix(alpha=1.0).sample_cell_mask((14, 14), count := 59)
                    for mix in (TLBlockMix, TLPatchMix))  # 0.3 * 196
    assert 0.2 * 196 <= block.sum() <= patch.sum() == count
    assert neighbours(block) > 1.5 * neighbours(patch)


def test_block_mix_too_small_grid_does_not_mix():
    """A 1-cell grid cannot hold a 4-cell block: nothing is mixed."""
    inputs, scores = random_batch(3, 16, 16)
    seed(0)
    mixed, mixed_scores, record = TLBlockMix(alpha=1.0).mix_with_record(
        inputs, scores)
    assert torch.equal(mixed, inputs) and torch.equal(mixed_scores,
                                                      scores.float())
    assert record.area_share[:, 0].tolist() == [1., 1., 1.]
