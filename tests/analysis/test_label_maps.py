"""tlalign_mm.analysis.label_maps: the initial map is each patch's pixel
share, the aligned map the model's own aligned patch labels."""
import copy

import pytest
import torch

from tlalign_mm.analysis.label_maps import label_colours, label_maps
from tlalign_mm.analysis.mixed_batches import mixed_batches
from tlalign_mm.analysis.session import build_model
from tlalign_mm.core import label_map_of
from tlalign_mm.models import aligned_forward

from .conftest import sharpen


def test_colours_red_to_blue():
    w = torch.tensor([1., 0.25, 0.]).view(1, 1, 3)
    torch.testing.assert_close(label_colours(torch.stack([w, 1 - w], 1))[
        0, 0], torch.tensor([[1., 0., 0.], [0.25, 0., 0.75], [0., 0., 1.]]))


# The demo config's 16x16 digits, patch 4: a 4x4 grid (Swin merges to 2x2).
@pytest.mark.parametrize('arch, grid', [('vit', (4, 4)), ('swin', (2, 2))])
def test_maps_are_patch_means_and_aligned_labels(setups, arch, grid):
    model = setups[arch].model
    batch = next(mixed_batches(model, setups[arch].loader, num_images=4))
    maps = label_maps(model, batch)
    torch.testing.assert_close(  # each 4x4 patch's mean pixel weight
        (maps.initial, maps.aligned.sum(1), maps.area),
        (batch.record.pixel_weights.reshape(4, 2, 4, 4, 4, 4).mean((3, 5)),
         torch.ones(4, *grid), batch.record.area_share))
    if arch == 'vit':  # alignment moved the labels
        assert (maps.aligned - maps.initial).abs().max() > 1e-3


def test_maps_follow_the_models_align_cfg(setups):
    """A ``-nonorm`` model (``residual_norm=False``) is mapped with its own
    rule, ``Y <- ĀY``, not the default ``(Y + ĀY) / 2``."""
    cfg = copy.deepcopy(setups['vit'].cfg)  # (the session's, unchanged)
    cfg.model.align_cfg = dict(residual_norm=False)
    model = sharpen(build_model(cfg, None, seed=0))
    batch = next(mixed_batches(model, setups['vit'].loader, num_images=4))
    maps, record = label_maps(model, batch), batch.record
    for residual_norm in (False, True):
        last = aligned_forward(
            model.backbone, batch.mixed, record.pixel_weights,
            record.area_share, dict(residual_norm=residual_norm),
            keep_history=True).history[-1]
        gap = (maps.aligned - label_map_of(last[:, 1:], (4, 4))).abs().max()
        assert gap > 1e-3 if residual_norm else gap == 0  # its own rule


def test_a_class_token_that_joins_late_is_no_patch_of_the_initial_map(
        setups):
    """XCiT's class token joins before its class attention: the initial map
    is every patch's label (none dropped as if it were the class token),
    the aligned one the patches' after the class token joined."""
    cfg = copy.deepcopy(setups['vit'].cfg)  # (the session's, unchanged)
    cfg.model.backbone = dict(type='XCiT', img_size=16, patch_size=8,
                              embed_dims=16, depth=1, cls_attn_layers=1,
                              num_heads=2)
    cfg.model.head = dict(type='LinearClsHead', num_classes=10,
                          in_channels=16)
    model = build_model(cfg, None, seed=0)
    batch = next(mixed_batches(model, setups['vit'].loader, num_images=4))
    maps, record = label_maps(model, batch), batch.record
    history = aligned_forward(model.backbone, batch.mixed,
                              record.pixel_weights, record.area_share,
                              model.align_cfg, keep_history=True).history
    assert [h.shape[1] for h in history] == [4, 4, 5]
    torch.testing.assert_close(maps.initial, label_map_of(history[0],
                                                          (2, 2)))
    torch.testing.assert_close(maps.aligned, label_map_of(history[-1][:, 1:],
                                                          (2, 2)))


def test_maps_of_a_class_token_that_joins_later():
    """T2T-ViT: the initial map is the first tokens' (its soft split's 4 px
    stride: a 16x16 grid of a 64 px image, no class token yet), the
    aligned map the last block's patch tokens (4x4), after the class
    token."""
    from types import SimpleNamespace

    from tlalign_mm.analysis.mixed_batches import MixedBatch
    from tlalign_mm.core import MixRecord

    from ..models import zoo
    images, pw, targets = zoo.random_mix(2, 2, 64, 64, box=(8, 40, 20, 52))
    record = MixRecord(pw, torch.tensor([[0, 1], [1, 0]]), pw.mean((2, 3)))
    model = SimpleNamespace(backbone=zoo.build(zoo.T2T))
    maps = label_maps(model, MixedBatch(images, images, record, targets))
    history = aligned_forward(model.backbone, images, pw,
                              keep_history=True).history
    assert maps.initial.shape == (2, 2, 16, 16)
    assert torch.equal(maps.initial, label_map_of(history[0], (16, 16)))
    assert torch.equal(maps.aligned, label_map_of(history[-1][:, 1:], (4, 4)))
