"""TLCutMix / TLMixup: mmpretrain's outputs, plus a faithful record."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import CutMix, Mixup

from tlalign_mm.mixing import TLCutMix, TLMixup

from .conftest import random_batch

SEEDS = range(6)
# (batch size, H, W): odd batch, batch of one, size not a multiple of 16.
SHAPES = [(5, 32, 48), (1, 32, 32), (4, 40, 56), (3, 21, 35)]


def _batch(batch_size, img_h, img_w, dtype=torch.float32, num_classes=7):
    return random_batch(batch_size, img_h, img_w,
                        1234 + batch_size + img_h, dtype, num_classes)


CUTMIX_KWARGS = [
    dict(alpha=1.0),
    dict(alpha=0.5, correct_lam=False),
    dict(alpha=1.0, cutmix_minmax=[0.2, 0.8]),
]


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('kwargs', CUTMIX_KWARGS)
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8])
def test_tl_cutmix_equals_mmpretrain(shape, kwargs, dtype, seed, check_record,
                                    mix_like_mmpretrain):
    inputs, scores = _batch(*shape, dtype=dtype)
    ref_aug, tl_aug = CutMix(**kwargs), TLCutMix(**kwargs)
    mixed_any = False
    for s in SEEDS:
        mixed, mixed_scores, record = mix_like_mmpretrain(
            tl_aug, ref_aug, inputs, scores, s)
        assert mixed.dtype == inputs.dtype  # pasted into a copy
        assert record.mode == 'cutmix'
        assert record.num_sources == 2
        check_record(
            record,
            inputs,
            scores,
            mixed,
            mixed_scores,
            exact_pixels=True,
            area_is_cls=kwargs.get('correct_lam', True))
        # Column 1 is the permutation: the same one mmpretrain drew.
        seed(s)
        np.random.beta(tl_aug.alpha, tl_aug.alpha)
        assert torch.equal(record.source_index[:, 1], torch.randperm(shape[0]))
        # Hard weights.
        assert set(record.pixel_weights.unique().tolist()) <= {0., 1.}
        mixed_any |= bool((record.pixel_weights[:, 1] > 0).any())
        if shape[0] == 1:
            assert record.source_index.tolist() == [[0, 0]]
    assert mixed_any, 'no seed produced a box: the test checks nothing'


def test_tl_cutmix_uncorrected_lam_is_the_sampled_one(seed):
    """With ``correct_lam=False`` area_share follow mmpretrain's scores,
    not the box area."""
    inputs, scores = _batch(4, 32, 32)
    aug = TLCutMix(alpha=1.0, correct_lam=False)
    differs = False
    for s in SEEDS:
        seed(s)
        _, mixed_scores, record = aug.mix_with_record(inputs, scores)
        rebuilt = torch.einsum('bs,bsc->bc', record.area_share,
                               scores.float()[record.source_index])
        # rtol=0, atol=1e-6 on shares and labels in [0, 1] (float32): 8 ulp
        # of 1 (2^-23 = 1.2e-7); the sides differ by a few roundings (a
        # two-term lam * a + (1 - lam) * b, a mean over the image's pixels)
        torch.testing.assert_close(rebuilt, mixed_scores, rtol=0, atol=1e-6)
        differs |= not torch.allclose(
            record.pixel_weights.mean((2, 3)), record.area_share, atol=1e-4)
    assert differs


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8])
def test_tl_mixup_equals_mmpretrain(shape, dtype, check_record,
                                   mix_like_mmpretrain):
    inputs, scores = _batch(*shape, dtype=dtype)
    ref_aug, tl_aug = Mixup(alpha=0.8), TLMixup(alpha=0.8)
    for s in SEEDS:
        mixed, mixed_scores, record = mix_like_mmpretrain(
            tl_aug, ref_aug, inputs, scores, s)
        assert record.mode == 'mixup'
        check_record(
            record,
            inputs,
            scores,
            mixed,
            mixed_scores,
            exact_pixels=False,
            area_is_cls=True)
        lam = record.area_share[0, 0]
        assert 0 < lam < 1
        assert torch.equal(record.pixel_weights[:, 0],
                           torch.full_like(record.pixel_weights[:, 0], lam))
        if shape[0] == 1:
            assert record.source_index.tolist() == [[0, 0]]


def test_tl_cutmix_box_cuts_through_patches(seed, cell_min_max):
    """A pixel-exact box gives tokens with fractional weights."""
    inputs, scores = _batch(2, 224, 224)
    aug = TLCutMix(alpha=1.0)
    seed(0)
    _, _, record = aug.mix_with_record(inputs, scores)
    pooled = F.avg_pool2d(record.pixel_weights[:, 1:2], 16)
    fractional = (pooled > 0) & (pooled < 1)
    assert bool(fractional.any())
    cmin, cmax = cell_min_max(record.pixel_weights, 16)
    assert bool((cmin != cmax).any())
