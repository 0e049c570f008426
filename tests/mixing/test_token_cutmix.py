"""TLTokenCutMix's official token-unit box (TL-Align's ``rand_token_bbox``),
its patch size taken from the model, and its parameter checks."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS

from tlalign_mm.mixing import TLTokenCutMix
from tlalign_mm.mixing.token_cutmix import token_box


def _batch(batch_size=4, img_h=224, img_w=224, num_classes=6):
    g = torch.Generator().manual_seed(3)
    inputs = torch.randn(batch_size, 3, img_h, img_w, generator=g)
    labels = torch.randint(0, num_classes, (batch_size, ), generator=g)
    return inputs, F.one_hot(labels, num_classes)


def _draws(monkeypatch, lam, centre):
    """Make the next beta draw ``lam`` and the two randint draws the
    centre ``(cy, cx)``, recording the randint bounds."""
    calls = []
    centre = list(centre)

    def randint(low, high=None, size=None):
        calls.append((low, high))
        return centre.pop(0)

    monkeypatch.setattr(np.random, 'beta', lambda a, b: lam)
    monkeypatch.setattr(np.random, 'randint', randint)
    return calls


# Hand-computed cases of the official rule on the 14x14 grid of a 224x224
# image with 16-pixel patches: side int(14 * sqrt(1 - lam)), corners
# centre -/+ side // 2 clipped to [0, 14].
HAND = [
    # lam 0.75: side int(14 * 0.5) = 7, half 3; rows 3-3..3+3 = [0, 6),
    # cols 12-3..12+3 = [9, 15) -> [9, 14): 6 x 5 = 30 tokens.
    (0.75, (3, 12), (0, 6, 9, 14), 1 - 30 / 196),
    # lam 0.5: side int(9.899) = 9, half 4 (the box is 8, not 9, tokens):
    # [3, 11) x [3, 11) = 64 tokens.
    (0.5, (7, 7), (3, 11, 3, 11), 1 - 64 / 196),
    # lam 0.99: side int(1.4) = 1, half 0: an empty box, nothing mixed.
    (0.99, (5, 9), (5, 5, 9, 9), 1.0),
    # lam 0.1: side int(13.28) = 13, half 6; rows [0, 6), cols [7, 14).
    (0.1, (0, 13), (0, 6, 7, 14), 1 - 42 / 196),
]


@pytest.mark.parametrize('lam,centre,box,kept', HAND)
def test_token_box_is_the_official_rule_by_hand(monkeypatch, lam, centre,
                                                box, kept):
    calls = _draws(monkeypatch, lam, centre)
    assert token_box((14, 14), lam) == box
    assert calls == [(0, 14), (0, 14)]  # randint(0, rows), randint(0, cols)

    calls = _draws(monkeypatch, lam, centre)
    inputs, scores = _batch()
    torch.manual_seed(0)
    index = torch.randperm(4)
    torch.manual_seed(0)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16, box_units='tokens')
    mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
    y1, y2, x1, x2 = (16 * v for v in box)
    expected = torch.zeros(224, 224)
    expected[y1:y2, x1:x2] = 1
    assert torch.equal(record.pixel_weights[0, 1], expected)
    assert torch.equal(record.source_index[:, 1], index)
    # area_share holds kept (a Python float) as float32: within half an ulp
    # (3e-8 in [0.5, 1)); 1e-7 is 1.7 ulp there
    assert record.area_share[0, 0].item() == pytest.approx(kept, abs=1e-7)
    torch.testing.assert_close(
        mixed_scores, kept * scores.float() + (1 - kept) * scores[index])
    want = inputs.clone()
    want[:, :, y1:y2, x1:x2] = inputs[index][:, :, y1:y2, x1:x2]
    assert torch.equal(mixed, want)
    if box[0] == box[1]:  # the empty box mixes nothing
        assert torch.equal(mixed, inputs)
        assert torch.equal(mixed_scores, scores.float())


def test_token_box_for_seeds_matches_the_official_formula(seed):
    """Real draws: numpy's beta, torch's permutation, then numpy's two
    randint calls, with the formula written out here."""
    inputs, scores = _batch(batch_size=3, img_h=224, img_w=224)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16, box_units='tokens')
    seen_empty = seen_clipped = 0
    for s in range(200):
        seed(s)
        lam = np.random.beta(1.0, 1.0)
        index = torch.randperm(3)
        cut = int(14 * np.sqrt(1 - lam))
        cy, cx = np.random.randint(0, 14), np.random.randint(0, 14)
        y1, y2 = max(cy - cut // 2, 0), min(cy + cut // 2, 14)
        x1, x2 = max(cx - cut // 2, 0), min(cx + cut // 2, 14)
        kept = 1 - (y2 - y1) * (x2 - x1) / 196
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        mask = torch.zeros(14, 14)
        mask[y1:y2, x1:x2] = 1
        pooled = F.avg_pool2d(record.pixel_weights[0, 1][None], 16)[0]
        assert torch.equal(pooled, mask), s
        assert torch.equal(record.source_index[:, 1], index)
        assert record.area_share[0, 0].item() == pytest.approx(kept)
        seen_empty += (y1 == y2 or x1 == x2)
        seen_clipped += (cy - cut // 2 < 0 or cy + cut // 2 > 14)
    assert seen_empty and seen_clipped, 'the seeds miss a case'


def test_partial_cells_count_pixels():
    """40x56 pixels, patch 16: a 3x4 grid whose last row and column are
    partial; the box is clipped to the image and lam counts pixels."""
    rng = np.random.RandomState(0)
    aug = TLTokenCutMix(alpha=1.0, patch_size=16, box_units='tokens')
    inputs, scores = _batch(2, 40, 56)
    for _ in range(30):
        np.random.seed(rng.randint(1 << 30))
        _, _, record = aug.mix_with_record(inputs, scores)
        weights = record.pixel_weights[0, 1]
        area = weights.sum().item()
        assert record.area_share[0, 1].item() == pytest.approx(
            area / (40 * 56))
        rows = weights.any(1).nonzero().flatten().tolist()
        cols = weights.any(0).nonzero().flatten().tolist()
        if rows:
            assert rows[0] % 16 == 0 and (rows[-1] + 1) in (16, 32, 40)
            assert cols[0] % 16 == 0 and (cols[-1] + 1) in (16, 32, 48, 56)


# ------------------------------------------------ the grid is the model's ---
ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)


def _classifier(backbone, patch_size=None, img=32):
    aug = dict(type='TLTokenCutMix', alpha=1.0, box_units='tokens')
    if patch_size is not None:
        aug['patch_size'] = patch_size
    return dict(
        type='TLAlignClassifier',
        backbone=backbone,
        head=dict(type='VisionTransformerClsHead', num_classes=5,
                  in_channels=48),
        data_preprocessor=dict(num_classes=5, mean=[127.5] * 3,
                               std=[127.5] * 3),
        train_cfg=dict(augments=[aug]))


VIT4 = dict(type='VisionTransformer', arch=ARCH, img_size=16, patch_size=4)


def _token_cutmix(model):
    return model.data_preprocessor.batch_augments.augments[0]


def test_patch_size_comes_from_the_model():
    model = MODELS.build(_classifier(VIT4))
    assert _token_cutmix(model).patch_size == 4
    model = MODELS.build(_classifier(VIT4, patch_size=4))
    assert _token_cutmix(model).patch_size == 4


def test_a_patch_size_that_differs_from_the_models_fails():
    """Issue 17: 16-pixel cells on a patch-4 model at 16x16 pixels swap the
    whole image or nothing (lam in {0, 1})."""
    with pytest.raises(ValueError, match=r'patch_size=16.*4x4 patches of '
                       r'VisionTransformer'):
        MODELS.build(_classifier(VIT4, patch_size=16))


@pytest.mark.parametrize('backbone,size', [
    (VIT4, (4, 4)),
    (dict(type='SwinTransformer', arch=dict(embed_dims=24, depths=[1, 1],
                                            num_heads=[1, 2]),
          img_size=32, patch_size=2, window_size=4, out_indices=(1, )),
     (2, 2)),
    (dict(type='SLViT', arch=ARCH, img_size=32, patch_size=8), (8, 8)),
])
def test_the_description_knows_the_patch_size(backbone, size):
    import tlalign_mm  # noqa: F401  (registers SLViT)
    from tlalign_mm.models.families import describe, patch_size
    model = MODELS.build(backbone)
    assert patch_size(describe(model).embed) == size


def test_unbound_patch_size_fails_clearly():
    aug = TLTokenCutMix(alpha=1.0)
    with pytest.raises(ValueError, match='takes the patch size of the model'):
        aug.mix_with_record(*_batch(2, 32, 32))


# ------------------------------------------------------ parameter checks ---
@pytest.mark.parametrize('kwargs,match', [
    (dict(alpha=0.), 'alpha'),
    (dict(alpha=-1.), 'alpha'),
    (dict(alpha=float('nan')), 'alpha'),
    (dict(alpha='1'), 'alpha'),
    (dict(alpha=1., patch_size=0), 'patch_size'),
    (dict(alpha=1., patch_size=2.5), 'patch_size'),
    (dict(alpha=1., box_units='token'), 'box_units'),
    (dict(alpha=1., box_units='tokens', cutmix_minmax=[0.2, 0.8]),
     'cutmix_minmax'),
    (dict(alpha=1., cutmix_minmax=[0.8, 0.2]), 'cutmix_minmax'),
])
def test_bad_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TLTokenCutMix(**kwargs)


def test_integer_alpha_is_accepted():
    assert TLTokenCutMix(alpha=1).alpha == 1.0
