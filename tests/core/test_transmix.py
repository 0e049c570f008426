"""TransMix's mixing ratio (tlalign_mm.core.transmix) against hand
computations. (Against the official code: tests/models/
test_tlalign_classifier.py::test_transmix_is_the_official_target_on_pixel_boxes.)"""
import pytest
import torch

from tlalign_mm.core.transmix import nearest_pixel_weights, transmix_lambda


def test_no_attention_on_patches_or_mixup_labels_give_the_area():
    """Mixup: every patch holds (lam, 1 - lam), so any attention gives
    lam; no attention on the patches falls back to the area."""
    attn = torch.rand(3, 16, generator=torch.Generator().manual_seed(0))
    lam = torch.tensor([0.2, 0.5, 0.9])
    area = torch.stack([lam, 1 - lam], 1)
    labels = area[:, None].expand(-1, 16, -1)
    torch.testing.assert_close(transmix_lambda(attn, labels, area), area)
    out = transmix_lambda(torch.zeros(3, 16), torch.rand(3, 16, 2).softmax(
        -1), area)
    torch.testing.assert_close(out, area)


def test_bad_shapes_are_a_clear_error():
    with pytest.raises(ValueError, match=r'\(B, N\)'):
        transmix_lambda(torch.rand(2, 4), torch.rand(2, 5, 2),
                        torch.rand(2, 2))


# --------------------------------------------- TransMix's own token mask ---
# A 4x4 image of 2x2 patches (a 2x2 token grid); source 1's pixel box covers
# rows 1-3 and columns 1-3 (9 of 16 pixels), cutting through three patches.
BOX = torch.zeros(4, 4)
BOX[1:, 1:] = 1
PIXELS = torch.stack([1 - BOX, BOX])[None]  # (1, 2, 4, 4)
# Class-token attention to the 4 patches (row-major; the class key took 0.2).
ATTN = torch.tensor([[0.1, 0.2, 0.3, 0.2]])


def _token_labels(pixel_weights):
    """(B, S, 4, 4) -> (B, 4, S): mean over each 2x2 patch."""
    return torch.nn.functional.avg_pool2d(pixel_weights, 2).flatten(
        2).transpose(1, 2)


def test_nearest_mask_on_partial_patches():
    # 5x3 pixels, 2x2 patches: cells start at rows 0, 2, 4 and cols 0, 2.
    pixels = torch.arange(15.).reshape(1, 1, 5, 3)
    out = nearest_pixel_weights(pixels, (2, 2))
    expected = torch.tensor([[0., 0., 2.], [0., 0., 2.], [6., 6., 8.],
                             [6., 6., 8.], [12., 12., 14.]])
    assert torch.equal(out[0, 0], expected)


def test_official_and_fractional_masks_by_hand():
    """By hand. Official: m = (0, 0, 0, 1), lam_attn = 0.2 / 0.8 = 0.25,
    lam_area = 9 / 16, so the box's weight is (0.5625 + 0.25) / 2 = 0.40625.
    Fractional: m = (1/4, 2/4, 2/4, 1), lam_attn = (0.025 + 0.1 + 0.15 +
    0.2) / 0.8 = 0.59375, so (0.5625 + 0.59375) / 2 = 0.578125: 0.171875
    more than TransMix's target on this box."""
    nearest = nearest_pixel_weights(PIXELS, (2, 2))
    area = nearest.mean((2, 3))
    assert area.tolist() == [[0.75, 0.25]]  # the nearest mask's own area
    official = transmix_lambda(ATTN, _token_labels(nearest),
                               PIXELS.mean((2, 3)))
    torch.testing.assert_close(official, torch.tensor([[0.59375, 0.40625]]))
    fractional = transmix_lambda(ATTN, _token_labels(PIXELS),
                                 torch.tensor([[7 / 16, 9 / 16]]))
    torch.testing.assert_close(fractional,
                               torch.tensor([[0.421875, 0.578125]]))
    assert (fractional - official)[0, 1].item() == pytest.approx(0.171875)
