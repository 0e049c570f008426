"""TLResizeMix: mmpretrain's ResizeMix bit for bit (images, scores and the
random state after the call), a record in which the pasted box is wholly the
partner image, and its way through the batch augment, the data
preprocessor and an aligned ViT forward."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import (
    RandomBatchAugment,
    ResizeMix,
)
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels
from tlalign_mm.mixing import TLRandomBatchAugment, TLResizeMix

from ..models.dense import dense_reference
from ..models.test_tlalign_classifier import fake_batch, model_cfg
from ..models.zoo import VIT, build
from .conftest import random_batch

SEEDS = range(6)
# (batch size, H, W): odd batch, batch of one, sizes not multiples of 16.
SHAPES = [(5, 32, 48), (1, 32, 32), (4, 40, 56), (3, 21, 35)]
KWARGS = [
    dict(alpha=1.0),
    dict(alpha=0.4, lam_min=0.3, lam_max=0.6),
    dict(alpha=2.0, lam_min=0.0, lam_max=0.95, interpolation='bicubic'),
    dict(alpha=1.0, correct_lam=False),
    dict(alpha=1.0, cutmix_minmax=[0.3, 0.9], interpolation='bicubic'),
]


def _batch(batch_size, img_h, img_w, dtype=torch.float32, num_classes=7):
    return random_batch(batch_size, img_h, img_w,
                        4321 + batch_size + img_w, dtype, num_classes)


def _replayed_box(kwargs, batch_size, img_shape):
    """mmpretrain's own draws for ResizeMix.mix, replayed from the current
    RNG state: ``(index, (y1, y2, x1, x2), lam)``."""
    ref = ResizeMix(**kwargs)
    lam = np.random.beta(ref.alpha, ref.alpha)
    lam = lam * (ref.lam_max - ref.lam_min) + ref.lam_min
    index = torch.randperm(batch_size)
    box, lam = ref.cutmix_bbox_and_lam(img_shape, lam)
    return index, tuple(int(v) for v in box), lam


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('kwargs', KWARGS)
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8])
def test_tl_resizemix_equals_mmpretrain(shape, kwargs, dtype, check_record,
                                        resized_sources, mix_like_mmpretrain):
    inputs, scores = _batch(*shape, dtype=dtype)
    ref_aug, tl_aug = ResizeMix(**kwargs), TLResizeMix(**kwargs)
    for s in SEEDS:
        mixed, mixed_scores, record = mix_like_mmpretrain(
            tl_aug, ref_aug, inputs, scores, s)
        assert mixed.dtype == inputs.dtype  # pasted into a copy
        assert record.mode == 'resizemix' and record.num_sources == 2
        check_record(
            record,
            inputs,
            scores,
            mixed,
            mixed_scores,
            exact_pixels=True,
            area_is_cls=kwargs.get('correct_lam', True),
            sources=resized_sources(record, inputs, tl_aug.interpolation))


@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('kwargs', KWARGS)
def test_the_box_is_wholly_the_resized_partner(shape, kwargs, seed):
    """Replaying mmpretrain's draws: source 2 has pixel weight 1 exactly in
    the box and 0 outside; the box holds the whole partner image resized;
    ``area_share`` gives the mixed scores (the area target) and, with a
    corrected lambda, is the box's pixel share."""
    batch_size, img_h, img_w = shape
    inputs, scores = _batch(*shape)
    aug = TLResizeMix(**kwargs)
    for s in SEEDS:
        seed(s)
        index, (y1, y2, x1, x2), lam = _replayed_box(kwargs, batch_size,
                                                     (img_h, img_w))
        seed(s)
        mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
        box = torch.zeros(img_h, img_w)
        box[y1:y2, x1:x2] = 1
        assert 0 < box.sum() < img_h * img_w
        pw = record.pixel_weights
        assert torch.equal(pw[:, 1], box.expand(batch_size, -1, -1))
        assert torch.equal(pw.sum(1), torch.ones(batch_size, img_h, img_w))
        assert torch.equal(record.source_index[:, 1], index)

        pasted = F.interpolate(inputs[index], size=(y2 - y1, x2 - x1),
                               mode=aug.interpolation, align_corners=False)
        assert torch.equal(mixed[:, :, y1:y2, x1:x2], pasted)
        outside = box == 0
        assert torch.equal(mixed[:, :, outside], inputs[:, :, outside])

        assert torch.equal(record.area_share[:, 0],
                           torch.full((batch_size, ), float(lam)))
        area_target = torch.einsum('bs,bsc->bc', record.area_share,
                                   record.source_targets(scores.float()))
        # rtol=0, atol=1e-6 on shares and labels in [0, 1] (float32): 8 ulp
        # of 1 (2^-23 = 1.2e-7); the sides differ by a few roundings (a
        # two-term lam * a + (1 - lam) * b, a mean over the image's pixels)
        torch.testing.assert_close(area_target, mixed_scores, rtol=0,
                                   atol=1e-6)
        if kwargs.get('correct_lam', True):
            kept = 1 - box.mean().item()
            assert record.area_share[0, 0].item() == pytest.approx(kept)


def test_uncorrected_lam_is_the_drawn_one(seed):
    """``correct_lam=False``: area_share (and mmpretrain's scores) keep the
    drawn lambda, in [lam_min, lam_max], not the box's pixel share."""
    inputs, scores = _batch(4, 32, 32)
    aug = TLResizeMix(alpha=1.0, lam_min=0.2, lam_max=0.7, correct_lam=False)
    differs = False
    for s in SEEDS:
        seed(s)
        drawn = np.random.beta(1.0, 1.0) * 0.5 + 0.2
        seed(s)
        _, _, record = aug.mix_with_record(inputs, scores)
        assert record.area_share[0, 0].item() == pytest.approx(drawn)
        differs |= not torch.allclose(
            record.pixel_weights.mean((2, 3)), record.area_share, atol=1e-4)
    assert differs


def test_an_empty_box_is_a_clear_error(seed):
    """On 2x2 images the box side ``int(2 * sqrt(1 - lam)) // 2`` is 0:
    mmpretrain fails inside F.interpolate, we say why."""
    inputs, scores = _batch(3, 2, 2)
    seed(0)
    with pytest.raises(RuntimeError, match='sizes should be greater than 0'):
        ResizeMix(alpha=1.0)(inputs.clone(), scores)
    seed(0)
    with pytest.raises(ValueError, match=r'TLResizeMix: the box drawn for 2x2'
                       r' images is empty .*smaller lam_max \(now 0.8\)'):
        TLResizeMix(alpha=1.0).mix_with_record(inputs, scores)


def test_through_tl_random_batch_augment(check_record, resized_sources,
                                         mix_like_mmpretrain):
    """The per-batch switch of Mixup / ResizeMix / nothing, as mmpretrain's
    RandomBatchAugment draws it."""
    inputs, scores = _batch(6, 32, 32)
    ref = RandomBatchAugment(
        [dict(type='Mixup', alpha=0.8),
         dict(type='ResizeMix', alpha=1.0)], probs=[0.4, 0.4])
    tl = TLRandomBatchAugment(
        [dict(type='TLMixup', alpha=0.8),
         dict(type='TLResizeMix', alpha=1.0)], probs=[0.4, 0.4])
    assert isinstance(tl.augments[1], TLResizeMix)
    modes = set()
    for s in range(20):
        mixed, mixed_scores, record = mix_like_mmpretrain(
            tl, ref, inputs, scores, s)
        modes.add(record.mode)
        sources = resized_sources(record, inputs, 'bilinear') \
            if record.mode == 'resizemix' else None
        check_record(record, inputs, scores, mixed, mixed_scores,
                     exact_pixels=record.mode != 'mixup', sources=sources)
    assert modes == {'resizemix', 'mixup', 'none'}


def test_aligned_vit_labels_are_the_dense_reference(seed):
    """A ResizeMix record through a tiny ViT (8-pixel patches, 32x32):
    the aligned labels match the dense reference to 1e-5 and are
    distributions; patch tokens cut by the box edge start fractional."""
    vit = build(VIT)
    inputs, scores = _batch(4, 32, 32, num_classes=10)
    aug = TLResizeMix(alpha=1.0)
    fractional = moved = False
    for s in range(4):
        seed(s)
        _, (y1, y2, x1, x2), _ = _replayed_box({'alpha': 1.0}, 4, (32, 32))
        box = torch.zeros(1, 1, 32, 32)
        box[..., y1:y2, x1:x2] = 1
        seed(s)
        mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
        targets = record.source_targets(scores.float())
        labels, history = align_labels(vit, mixed, record.pixel_weights,
                                       targets, record.area_share,
                                       return_token_labels=True)
        ref, _ = dense_reference(vit, mixed, record.pixel_weights, targets,
                                 record.area_share)
        assert (labels.double() - ref).abs().max() <= 1e-5
        torch.testing.assert_close(labels.sum(-1), torch.ones(4), rtol=0,
                                   atol=1e-5)
        assert bool((labels >= -1e-6).all())
        for token_labels in history:  # (B, N, S) source weights
            torch.testing.assert_close(token_labels.sum(-1),
                                       torch.ones(token_labels.shape[:2]),
                                       rtol=0, atol=1e-5)
        # The class token starts at the area target.
        torch.testing.assert_close(history[0][:, 0], record.area_share)
        # Each patch token starts at the share of its pixels in the box.
        patch_share = history[0][:, 1:, 1]
        torch.testing.assert_close(
            patch_share, F.avg_pool2d(box, 8).flatten(1).expand(4, -1))
        fractional |= bool(((patch_share > 0) & (patch_share < 1)).any())
        moved |= (labels - mixed_scores).abs().max().item() > 1e-3
    assert fractional, 'no box cut through a patch: the test checks less'
    assert moved, 'the alignment moved nothing: the test cannot fail'


def test_one_line_trains_on_a_resizemix_list_with_probs(seed):
    """The loss path of the one-line change: TLAlignClassifier given
    mmpretrain's own Mixup / ResizeMix list with probs (as an mmpretrain
    recipe writes it) sets the aligned label, a distribution other than
    the area target, as the head's gt_score, and logs how far it moved."""
    torch.manual_seed(0)
    cfg = model_cfg()
    cfg['train_cfg'] = dict(augments=[dict(type='Mixup', alpha=0.8),
                                      dict(type='ResizeMix', alpha=1.0)],
                            probs=[0.2, 0.8])
    model = MODELS.build(cfg)
    model.init_weights()
    model.train()
    seed(1)
    batch = model.data_preprocessor(fake_batch(4), training=True)
    mix = batch['mix']
    assert mix.mode == 'resizemix'
    area = torch.stack([s.gt_score for s in batch['data_samples']])
    model.backbone.eval()  # no drop-path: a deterministic reference
    expected = align_labels(model.backbone, batch['inputs'],
                            mix.pixel_weights, mix.targets, mix.area_share)
    head_loss, targets = model.head.loss, []

    def spy(feats, data_samples):  # what the head's loss is given
        targets.append(torch.stack([s.gt_score for s in data_samples]))
        return head_loss(feats, data_samples)

    model.head.loss = spy
    losses = model(**batch, mode='loss')
    aligned, = targets
    torch.testing.assert_close(aligned, expected)
    torch.testing.assert_close(aligned.sum(-1), torch.ones(4))
    moved = (aligned - area).abs().amax().item()
    assert moved > 1e-3, 'the target is the area target'
    assert losses['label_drift/abs_diff'].item() > 1e-4
