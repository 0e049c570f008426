"""TransMix's mixing ratio (tlalign_mm.core.transmix) against hand
computations."""
import pytest
import torch

from tlalign_mm.core.transmix import (
    attention_lambda,
    transmix_lambda,
    transmix_lambda_from_weighted,
)


def test_lambda_is_the_hand_computation_on_a_fixed_attention_map():
    # 4 patch tokens (2x2 grid); the box of source 1 covers the right column.
    # Attention of the class token to the patches (the class key took the
    # remaining 0.2 of the softmax): TransMix renormalises over patches.
    attn = torch.tensor([[0.1, 0.4, 0.1, 0.2]])
    labels = torch.tensor([[[1., 0.], [0., 1.], [1., 0.], [0., 1.]]])
    area = torch.tensor([[0.5, 0.5]])
    # lam_attn(source 1) = (0.4 + 0.2) / 0.8 = 0.75; lam = (0.5 + 0.75) / 2
    expected = torch.tensor([[0.375, 0.625]])
    torch.testing.assert_close(transmix_lambda(attn, labels, area), expected)
    # Only ratios between patches matter.
    torch.testing.assert_close(transmix_lambda(attn * 7, labels, area),
                               expected)


def test_fractional_patch_labels_and_three_sources():
    attn = torch.tensor([[0.2, 0.3, 0.5]])
    labels = torch.tensor([[[0.5, 0.5, 0.], [0., 0.25, 0.75], [1., 0., 0.]]])
    area = torch.tensor([[0.6, 0.2, 0.2]])
    weighted = torch.tensor([[0.1 + 0.5, 0.1 + 0.075, 0.225]])  # sums to 1
    expected = 0.5 * area + 0.5 * weighted
    out = transmix_lambda(attn, labels, area)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out.sum(-1), torch.ones(1))


def test_mean_with_the_area_lambda_and_other_ratios():
    weighted = torch.tensor([[0.3, 0.1], [0.0, 0.2]])
    area = torch.tensor([[0.5, 0.5], [0.9, 0.1]])
    lam_attn = torch.tensor([[0.75, 0.25], [0.0, 1.0]])
    torch.testing.assert_close(attention_lambda(weighted, area), lam_attn)
    torch.testing.assert_close(
        transmix_lambda_from_weighted(weighted, area),
        (area + lam_attn) / 2)
    torch.testing.assert_close(
        transmix_lambda_from_weighted(weighted, area, ratio=1.), lam_attn)
    torch.testing.assert_close(
        transmix_lambda_from_weighted(weighted, area, ratio=0.), area)


def test_no_attention_on_patches_falls_back_to_the_area():
    area = torch.tensor([[0.7, 0.3]])
    out = transmix_lambda(torch.zeros(1, 3), torch.rand(1, 3, 2).softmax(-1),
                          area)
    torch.testing.assert_close(out, area)


def test_mixup_labels_keep_the_area_lambda():
    # Mixup: every patch holds (lam, 1 - lam), so any attention gives lam.
    g = torch.Generator().manual_seed(0)
    attn = torch.rand(3, 16, generator=g)
    lam = torch.tensor([0.2, 0.5, 0.9])
    area = torch.stack([lam, 1 - lam], 1)
    labels = area[:, None].expand(-1, 16, -1)
    torch.testing.assert_close(transmix_lambda(attn, labels, area), area)


def test_bad_shapes_are_a_clear_error():
    with pytest.raises(ValueError, match=r'\(B, N\)'):
        transmix_lambda(torch.rand(2, 4), torch.rand(2, 5, 2),
                        torch.rand(2, 2))
