"""tlalign_mm.analysis.presence: a token's presence is its column sum of the
head-mean attention."""
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm.analysis.presence import token_presence

from ..models.test_tlalign_classifier import explicit_attention
from .conftest import sharpen


def build(type, **kwargs):
    """A sharpened model in eval mode (mmpretrain's train() returns None)."""
    torch.manual_seed(0)
    (model := sharpen(MODELS.build(dict(type=type, img_size=32, **kwargs)))
     ).eval()
    return model


def vit(**kwargs):
    return build('VisionTransformer', patch_size=8, arch=dict(
        embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96),
        **kwargs)


def test_presence_is_the_column_sum_of_the_attention():
    model, images = vit(), torch.randn(2, 3, 32, 32)
    layers = token_presence(model, images)
    assert len(layers) == 2
    for i, p in enumerate(layers):
        column_sums = explicit_attention(model, images, i).sum(1)
        assert p.grid == (4, 4) and p.patches.std() > 1e-3  # not uniform
        torch.testing.assert_close((p.extra, p.patches), (column_sums[:, 0],
                                                          column_sums[:, 1:]))


def test_swin_presence_sums_to_the_tokens_of_each_stage():
    layers = token_presence(build(
        'SwinTransformer', window_size=4, out_indices=(1, ), arch=dict(
            embed_dims=16, depths=[2, 2], num_heads=[2, 2])),
        torch.randn(2, 3, 32, 32))
    assert [p.grid for p in layers] == [(8, 8), (8, 8), (4, 4), (4, 4)]
    for p in layers:  # rows of Ā sum to 1: presences sum to the tokens
        assert p.extra is None and p.patches.std() > 1e-3
        torch.testing.assert_close(p.patches.sum(1), torch.full(
            (2, ), p.grid[0] * p.grid[1] * 1.))


def test_overlapping_patches_are_a_clear_error():
    with pytest.raises(NotImplementedError, match='non-overlapping'):
        token_presence(vit(patch_cfg=dict(stride=4)),
                       torch.randn(1, 3, 32, 32))
