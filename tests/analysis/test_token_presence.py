"""tlalign_mm.analysis.presence: a token's presence is its column sum of the
head-mean attention. The models: the shared ViT and Swin (conftest.py),
sharpened, on 16x16 images of 4x4-pixel patches."""
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm.analysis.presence import token_presence

from ..models.test_tlalign_classifier import explicit_attention

IMAGES = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))


def test_presence_is_the_column_sum_of_the_attention(setups):
    model = setups['vit'].model.backbone
    layers = token_presence(model, IMAGES)
    assert len(layers) == 4
    for i, p in enumerate(layers):
        column_sums = explicit_attention(model, IMAGES, i).sum(1)
        assert p.grid == (4, 4) and p.patches.std() > 1e-3  # not uniform
        torch.testing.assert_close((p.extra, p.patches), (column_sums[:, 0],
                                                          column_sums[:, 1:]))


def test_swin_presence_sums_to_the_tokens_of_each_stage(setups):
    layers = token_presence(setups['swin'].model.backbone, IMAGES)
    assert [p.grid for p in layers] == [(4, 4), (4, 4), (2, 2), (2, 2)]
    for p in layers:  # rows of Ā sum to 1: presences sum to the tokens
        assert p.extra is None and p.patches.std() > 1e-3
        torch.testing.assert_close(p.patches.sum(1), torch.full(
            (2, ), p.grid[0] * p.grid[1] * 1.))


def test_overlapping_patches_are_a_clear_error():
    vit = MODELS.build(dict(type='VisionTransformer', arch='deit-tiny',
                            img_size=32, patch_cfg=dict(stride=4)))
    with pytest.raises(NotImplementedError, match='non-overlapping'):
        token_presence(vit, torch.randn(1, 3, 32, 32))
