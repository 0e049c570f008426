"""tools/analysis/token_presence.py and tlalign_mm.analysis.presence."""
import csv
import json

import numpy as np
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm.analysis.presence import token_presence

from ..models.test_tlalign_classifier import explicit_attention
from .conftest import FEW, sharpen


def vit(**kwargs):
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='VisionTransformer', img_size=32, patch_size=8,
        arch=dict(embed_dims=48, num_layers=2, num_heads=3,
                  feedforward_channels=96), **kwargs))
    sharpen(model)
    model.eval()
    return model


def test_presence_is_the_column_sum_of_the_attention():
    model = vit()
    images = torch.randn(2, 3, 32, 32)
    layers = token_presence(model, images)
    assert len(layers) == 2
    for i, p in enumerate(layers):
        column_sums = explicit_attention(model, images, i).sum(1)
        assert p.grid == (4, 4)
        torch.testing.assert_close(p.extra, column_sums[:, 0])
        torch.testing.assert_close(p.patches, column_sums[:, 1:])
        # Rows of Ā sum to 1: presences sum to N = 17 tokens.
        torch.testing.assert_close(p.patches.sum(1) + p.extra,
                                   torch.full((2, ), 17.))
        assert p.patches.std() > 1e-3  # the attention is not uniform


def test_identity_attention_gives_presence_one(monkeypatch):
    import tlalign_mm.core.records
    from tests.models.zoo import identity_attention
    model = vit()
    monkeypatch.setattr(tlalign_mm.core.records, 'head_mean_attention',
                        identity_attention)
    for p in token_presence(model, torch.randn(2, 3, 32, 32)):
        torch.testing.assert_close(p.patches, torch.ones(2, 16))
        torch.testing.assert_close(p.extra, torch.ones(2))


def test_swin_presence_sums_to_the_tokens_of_each_stage():
    torch.manual_seed(0)
    swin = MODELS.build(dict(
        type='SwinTransformer', img_size=32, window_size=4,
        arch=dict(embed_dims=16, depths=[2, 2], num_heads=[2, 2]),
        out_indices=(1, )))
    sharpen(swin)
    swin.eval()
    layers = token_presence(swin, torch.randn(2, 3, 32, 32))
    assert [p.grid for p in layers] == [(8, 8), (8, 8), (4, 4), (4, 4)]
    for p in layers:
        assert p.extra is None
        n = p.grid[0] * p.grid[1]
        torch.testing.assert_close(p.patches.sum(1), torch.full((2, ), n * 1.))
        assert p.patches.std() > 1e-3


def test_overlapping_patches_are_a_clear_error():
    model = vit(patch_cfg=dict(stride=4))
    with pytest.raises(NotImplementedError, match='non-overlapping'):
        token_presence(model, torch.randn(1, 3, 32, 32))


def test_cli_writes_the_distribution(setups, run_tool, tmp_path):
    rows = run_tool('token_presence', [*setups['vit'].paths, '--work-dir',
                                       tmp_path, *FEW])
    assert [r['block'] for r in rows] == [1, 2, 3, 4]
    for row in rows:
        assert row['num_tokens'] == 17  # the demo: 16x16 px, patch 4
        # 16 patch tokens and the class token average 1.
        assert (16 * row['mean'] + row['class_token_mean']) / 17 == \
            pytest.approx(1.0, abs=1e-5)
        assert row['std'] > 1e-3
    with open(tmp_path / 'presence.csv') as f:
        assert len(list(csv.DictReader(f))) == 4
    summary = json.loads((tmp_path / 'presence.json').read_text())
    assert summary['num_images'] == 8 and summary['grids'][0] == [4, 4]
    values = np.load(tmp_path / 'presence.npz')
    assert values['block1_patches'].shape == (8, 16)
    assert (tmp_path / 'presence.png').stat().st_size > 1000
