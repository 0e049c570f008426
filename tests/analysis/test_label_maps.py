"""tools/analysis/label_maps.py and tlalign_mm.analysis.label_maps."""
import json

import pytest
import torch

from tlalign_mm.analysis.label_maps import (
    label_colours,
    label_maps,
    token_grid,
)
from tlalign_mm.analysis.mixed_batches import mixed_batches
from tlalign_mm.analysis.session import build_model
from tlalign_mm.core import label_map_of
from tlalign_mm.models import aligned_forward

from .conftest import NO_SERIALIZE, sharpen


def test_colours_red_to_blue():
    w = torch.tensor([1., 0.25, 0.]).view(1, 1, 3)
    rgb = label_colours(torch.stack([w, 1 - w], 1))
    torch.testing.assert_close(
        rgb[0, 0], torch.tensor([[1., 0., 0.], [0.25, 0., 0.75],
                                 [0., 0., 1.]]))


def test_token_grid():
    assert token_grid(64, (32, 32)) == (8, 8)
    assert token_grid(8, (16, 32)) == (2, 4)
    assert token_grid(14 * 14, (224, 224)) == (14, 14)


# The demo config's 16x16 digits, patch 4: a 4x4 grid (Swin merges to 2x2).
@pytest.mark.parametrize('arch, grids', [('vit', ((4, 4), (4, 4))),
                                         ('swin', ((4, 4), (2, 2)))])
def test_maps_are_patch_means_and_aligned_labels(setups, arch, grids):
    model = setups[arch].model
    batch = next(mixed_batches(model, setups[arch].loader, num_images=4))
    maps = label_maps(model, batch)
    assert maps.initial.shape[-2:] == grids[0]
    assert maps.aligned.shape[-2:] == grids[1]
    # The initial map: each 4x4 patch's mean pixel weight.
    pw = batch.record.pixel_weights
    torch.testing.assert_close(
        maps.initial, pw.reshape(4, 2, 4, 4, 4, 4).mean((3, 5)))
    torch.testing.assert_close(maps.aligned.sum(1), torch.ones(4, *grids[1]))
    if arch == 'vit':  # alignment moved the labels
        assert (maps.aligned - maps.initial).abs().max() > 1e-3
    torch.testing.assert_close(maps.area, batch.record.area_share)


def test_maps_follow_the_models_align_cfg(setups):
    """A ``-nonorm`` model (``residual_norm=False``) is mapped with its own
    rule, ``Y <- ĀY``, not the default ``(Y + ĀY) / 2``."""
    cfg = setups['vit'].cfg.copy()
    cfg.model.align_cfg = dict(residual_norm=False)
    model = build_model(cfg, None, seed=0)
    sharpen(model)
    batch = next(mixed_batches(model, setups['vit'].loader, num_images=4))
    maps, record = label_maps(model, batch), batch.record
    for residual_norm in (False, True):
        last = aligned_forward(model.backbone, batch.mixed,
                               record.pixel_weights, record.area_share,
                               residual_norm=residual_norm,
                               keep_history=True).history[-1]
        gap = (maps.aligned - label_map_of(last[:, 1:], (4, 4))).abs().max()
        assert gap > 1e-3 if residual_norm else gap == 0  # its own rule


@pytest.mark.parametrize('mix', ['cutmix', 'resizemix'])
def test_cli_writes_the_grid(setups, run_tool, tmp_path, mix):
    rows = run_tool('label_maps', [
        *setups['vit'].paths, '--work-dir', tmp_path, '--out', 'maps.png',
        '--mix', mix, '--num-images', 4, '--batch-size', 8, '--cfg-options',
        NO_SERIALIZE
    ])
    assert len(rows) == 4
    png = tmp_path / 'maps.png'
    assert 1000 < png.stat().st_size < 200_000
    saved = json.loads((tmp_path / 'maps.json').read_text())
    assert saved['rows'][0]['cutmix_label'] == rows[0]['cutmix_label']
    assert saved['mix'] == {'cutmix': 'CutMix', 'resizemix': 'ResizeMix'}[mix]
    assert len(saved['rows'][0]['aligned_map']) == 4  # 4x4 patch tokens
