"""TLAlignDataPreprocessor: ClsDataPreprocessor's outputs plus the batch's
mix record, returned as ``mix``."""
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import tlalign_mm.mixing  # noqa: F401  (registers the TL types)

NUM_CLASSES = 5
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def mix_rows(out):
    """Per sample: the sample and its rows of the batch's record."""
    mix = out['mix']
    return zip(out['data_samples'], mix.pixel_weights, mix.targets,
               mix.area_share)


def _preprocessor(tl=True, probs=(0.5, 0.5), **kwargs):
    prefix = 'TL' if tl else ''
    augments = [
        dict(type=f'{prefix}CutMix', alpha=1.0),
        dict(type=f'{prefix}Mixup', alpha=0.8)
    ]
    return MODELS.build(
        dict(
            type='TLAlignDataPreprocessor' if tl else 'ClsDataPreprocessor',
            mean=MEAN,
            std=STD,
            num_classes=NUM_CLASSES,
            batch_augments=dict(augments=augments, probs=list(probs)),
            **kwargs))


def _data(batch_size=5, sizes=((40, 56), ), stacked=False):
    """A fresh fake batch (data samples are modified by preprocessors)."""
    g = torch.Generator().manual_seed(batch_size)
    inputs = [
        torch.randint(0, 256, (3, *sizes[i % len(sizes)]),
                      generator=g).to(torch.uint8) for i in range(batch_size)
    ]
    if stacked:
        inputs = torch.stack(inputs)
    data_samples = [
        DataSample().set_gt_label(i % NUM_CLASSES) for i in range(batch_size)
    ]
    return dict(inputs=inputs, data_samples=data_samples)


def test_builds_with_tl_random_batch_augment():
    from tlalign_mm.mixing import (
        TLAlignDataPreprocessor,
        TLCutMix,
        TLRandomBatchAugment,
    )
    pre = _preprocessor()
    assert isinstance(pre, TLAlignDataPreprocessor)
    assert isinstance(pre.batch_augments, TLRandomBatchAugment)
    assert isinstance(pre.batch_augments.augments[0], TLCutMix)
    assert pre.to_onehot


@pytest.mark.parametrize('batch_size', [1, 5])
def test_per_sample_fields(batch_size, seed):
    pre = _preprocessor()
    seen = set()
    for s in range(8):
        seed(s)
        out = pre(_data(batch_size), training=True)
        inputs, samples = out['inputs'], out['data_samples']
        img_h, img_w = inputs.shape[-2:]
        assert len(samples) == out['mix'].pixel_weights.shape[0]
        for sample, pw, targets, cw in mix_rows(out):
            num_sources = pw.size(0)
            assert num_sources == 2
            assert pw.shape == (num_sources, img_h, img_w)
            assert pw.dtype == torch.float32
            assert targets.shape == (num_sources, NUM_CLASSES)
            assert cw.shape == (num_sources, )
            # rtol=0, atol=1e-6 on shares and labels in [0, 1] (float32):
            # 8 ulp of 1 (2^-23 = 1.2e-7); the sides differ by a few
            # roundings (a two-term lam * a + (1 - lam) * b, a mean over
            # the image's pixels)
            torch.testing.assert_close(
                cw @ targets, sample.gt_score, rtol=0, atol=1e-6)
            torch.testing.assert_close(pw.mean((1, 2)), cw, rtol=0, atol=1e-6)
            torch.testing.assert_close(
                pw.sum(0), torch.ones(img_h, img_w), rtol=0, atol=1e-6)
            # Source 0 is the sample itself, with its unmixed one-hot label.
            own = F.one_hot(sample.gt_label, NUM_CLASSES)[0].float()
            assert torch.equal(targets[0], own)
            assert targets[1].sum() == 1
            if batch_size == 1:
                assert torch.equal(targets[1], own)
            hard = set(pw.unique().tolist()) <= {0., 1.}
            seen.add('cutmix' if hard else 'mixup')
    assert seen == {'cutmix', 'mixup'}


def _classifier_preprocessor(model_type, augments, probs, pad):
    """The data preprocessor of a tiny ``model_type`` classifier built from
    an mmpretrain-style config: ``train_cfg`` holds the augments."""
    width = 16
    model = MODELS.build(dict(
        type=model_type,
        backbone=dict(type='VisionTransformer', img_size=32, patch_size=8,
                      arch=dict(embed_dims=width, num_layers=1, num_heads=2,
                                feedforward_channels=width)),
        head=dict(type='VisionTransformerClsHead', num_classes=NUM_CLASSES,
                  in_channels=width),
        data_preprocessor=dict(mean=MEAN, std=STD, num_classes=NUM_CLASSES,
                               pad_size_divisor=pad),
        train_cfg=dict(augments=augments, probs=list(probs))))
    return model.data_preprocessor


# mmpretrain's augments, the type spelled as a recipe may spell it.
SPELLINGS = [lambda cls: cls.__name__,
             lambda cls: f'mmpretrain.{cls.__name__}', lambda cls: cls]


@pytest.mark.parametrize(
    'batch_size,sizes,stacked,pad,spell',
    [
        (6, ((32, 32), ), False, 1, SPELLINGS[0]),
        (1, ((32, 32), ), False, 1, SPELLINGS[1]),
        (3, ((40, 56), (33, 50)), False, 16, SPELLINGS[2]),  # padded
        (4, ((24, 40), ), True, 1, SPELLINGS[0]),  # default_collate branch
    ])
def test_one_line_mixes_as_cls_data_preprocessor(batch_size, sizes, stacked,
                                                 pad, spell, seed, rng_state):
    """The one-line change: a TLAlignClassifier given an mmpretrain
    recipe's own train_cfg (Mixup, CutMix, ResizeMix with probs) mixes as
    ImageClassifier's ClsDataPreprocessor does with it, from the same seeds:
    same inputs, gt_score and random state after, the 'no mixing' choice
    included."""
    from mmpretrain.models.utils.batch_augments import (
        CutMix,
        Mixup,
        ResizeMix,
    )

    def build(model_type):
        augments = [dict(type=spell(CutMix), alpha=1.0),
                    dict(type=spell(Mixup), alpha=0.8),
                    dict(type=spell(ResizeMix), alpha=1.0)]
        return _classifier_preprocessor(model_type, augments,
                                        (0.3, 0.3, 0.2), pad)

    tl, ref = build('TLAlignClassifier'), build('ImageClassifier')
    assert [type(a).__name__ for a in tl.batch_augments.augments] == [
        'TLCutMix', 'TLMixup', 'TLResizeMix', 'NoneType']
    modes = set()
    for s in range(12):
        seed(s)
        ref_out = ref(_data(batch_size, sizes, stacked), training=True)
        ref_state = rng_state()
        seed(s)
        out = tl(_data(batch_size, sizes, stacked), training=True)
        assert rng_state() == ref_state
        assert torch.equal(out['inputs'], ref_out['inputs'])
        if pad > 1:
            assert out['inputs'].shape[-2] % pad == 0
        assert 'mix' not in ref_out
        modes.add(out['mix'].mode)
        for (sample, pw, targets, cw), ref_sample in zip(
                mix_rows(out), ref_out['data_samples']):
            assert torch.equal(sample.gt_score, ref_sample.gt_score)
            assert sample.gt_score.dtype == ref_sample.gt_score.dtype
            assert torch.equal(sample.gt_label, ref_sample.gt_label)
            assert pw.shape[-2:] == out['inputs'].shape[-2:]
            # as above: 8 ulp of 1
            torch.testing.assert_close(cw @ targets, sample.gt_score, rtol=0,
                                       atol=1e-6)
    # Every augment and the 'no mixing' branch were compared.
    assert modes == {'cutmix', 'mixup', 'resizemix', 'none'}


def test_no_mixing_branch_records_identity(seed):
    pre = _preprocessor(probs=(0.0, 0.0))
    seed(0)
    out = pre(_data(3), training=True)
    assert out['mix'].mode == 'none'
    for sample, pw, targets, cw in mix_rows(out):
        assert pw.shape == (1, 40, 56)
        assert bool((pw == 1).all())
        assert cw.tolist() == [1.0]
        assert torch.equal(targets[0], sample.gt_score)
        assert sample.gt_score.dtype == torch.float32


def test_not_training_returns_no_mix(seed):
    tl, ref = _preprocessor(), _preprocessor(tl=False)
    seed(0)
    out = tl(_data(4), training=False)
    seed(0)
    ref_out = ref(_data(4), training=False)
    assert torch.equal(out['inputs'], ref_out['inputs'])
    assert set(out) == {'inputs', 'data_samples'}
    for sample, ref_sample in zip(out['data_samples'],
                                  ref_out['data_samples']):
        assert torch.equal(sample.gt_score, ref_sample.gt_score)


def test_without_batch_augments_is_cls_data_preprocessor():
    pre = MODELS.build(
        dict(type='TLAlignDataPreprocessor', mean=MEAN, std=STD))
    assert pre.batch_augments is None and not pre.to_onehot
    out = pre(_data(2), training=True)
    assert set(out) == {'inputs', 'data_samples'}
    for sample in out['data_samples']:
        assert 'gt_score' not in sample


def test_keeps_no_state_between_calls(seed):
    pre = _preprocessor()
    before = {k: id(v) for k, v in vars(pre).items()}
    buffers = dict(pre.named_buffers())
    aug_state = [dict(vars(a)) for a in pre.batch_augments.augments if a]
    wrapper_state = dict(vars(pre.batch_augments))
    seed(0)
    pre(_data(3), training=True)
    assert {k: id(v) for k, v in vars(pre).items()} == before
    assert dict(vars(pre.batch_augments)) == wrapper_state
    assert dict(pre.named_buffers()).keys() == buffers.keys()
    assert [dict(vars(a)) for a in pre.batch_augments.augments
            if a] == aug_state
