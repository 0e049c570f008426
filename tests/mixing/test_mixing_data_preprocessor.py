"""TLAlignDataPreprocessor: ClsDataPreprocessor's outputs plus the batch's
mix record, returned as ``mix``: the one-line change of a recipe."""
import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import CutMix, Mixup, ResizeMix
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import tlalign_mm.mixing  # noqa: F401  (registers the TL types)

from .conftest import close, rng_state, seed

NUM_CLASSES = 5
ARCH = dict(embed_dims=16, num_layers=1, num_heads=2, feedforward_channels=16)
TYPES = ('TLAlignClassifier', 'ImageClassifier')
NORM = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])


def _data(batch_size=5, sizes=((40, 56), ), stacked=False):
    """A fresh fake batch (data samples are modified by preprocessors)."""
    g = torch.Generator().manual_seed(batch_size)
    inputs = [torch.randint(0, 256, (3, *sizes[i % len(sizes)]), generator=g,
                            dtype=torch.uint8) for i in range(batch_size)]
    return dict(inputs=torch.stack(inputs) if stacked else inputs,
                data_samples=[DataSample().set_gt_label(i % NUM_CLASSES)
                              for i in range(batch_size)])


def _preprocessor(model_type, spell=lambda cls: cls.__name__, pad=1):
    """The data preprocessor of a tiny ``model_type`` classifier built from
    an mmpretrain recipe's own train_cfg (Mixup, CutMix, ResizeMix with
    probs), the types spelled as a recipe may spell them."""
    augments = [dict(type=spell(cls), alpha=a) for cls, a in (
        (CutMix, 1.0), (Mixup, 0.8), (ResizeMix, 1.0))]
    return MODELS.build(dict(
        type=model_type, backbone=dict(type='VisionTransformer', arch=ARCH),
        head=dict(type='VisionTransformerClsHead', num_classes=NUM_CLASSES,
                  in_channels=16), data_preprocessor=dict(
            num_classes=NUM_CLASSES, pad_size_divisor=pad, **NORM),
        train_cfg=dict(augments=augments, probs=[0.3, 0.3, 0.2]))
    ).data_preprocessor


@pytest.mark.parametrize('batch_size,sizes,stacked,pad,spell', [
    (6, ((32, 32), ), False, 1, lambda cls: cls.__name__),
    (1, ((24, 40), ), True, 1, lambda cls: f'mmpretrain.{cls.__name__}'),
    (3, ((40, 56), (33, 50)), False, 16, lambda cls: cls)])  # padded
def test_one_line_mixes_as_cls_data_preprocessor(batch_size, sizes, stacked,
                                                 pad, spell):
    """A TLAlignClassifier given a recipe's train_cfg mixes as
    ImageClassifier's ClsDataPreprocessor does with it, from the same seeds:
    same inputs, gt_score and random state after, the 'no mixing' choice
    included; per sample, the record's rows give its gt_score, its source 0
    is the sample with its one-hot label. The preprocessor and its augments
    keep no state between calls."""
    tl, ref = (_preprocessor(t, spell, pad) for t in TYPES)
    assert [type(a).__name__ for a in tl.batch_augments.augments] == [
        'TLCutMix', 'TLMixup', 'TLResizeMix', 'NoneType']
    modules = (tl, tl.batch_augments, *tl.batch_augments.augments[:3])
    state = [dict(vars(m)) for m in modules]
    modes = set()
    for s in range(12):
        seed(s)
        ref_out = ref(_data(batch_size, sizes, stacked), training=True)
        ref_state = rng_state()
        seed(s)
        out = tl(_data(batch_size, sizes, stacked), training=True)
        assert rng_state() == ref_state and 'mix' not in ref_out
        assert torch.equal(out['inputs'], ref_out['inputs'])
        modes.add((mix := out['mix']).mode)
        assert mix.pixel_weights.shape[-2:] == out['inputs'].shape[-2:]
        for sample, ref_sample, pw, targets, area in zip(
                out['data_samples'], ref_out['data_samples'],
                mix.pixel_weights, mix.targets, mix.area_share):
            assert torch.equal(sample.gt_score, ref_sample.gt_score)
            assert sample.gt_score.dtype == ref_sample.gt_score.dtype
            close(area @ targets, sample.gt_score)
            close(pw.mean((1, 2)), area)
            assert torch.equal(targets[0], F.one_hot(
                sample.gt_label, NUM_CLASSES)[0].float())
    assert modes == {'cutmix', 'mixup', 'resizemix', 'none'}
    assert [dict(vars(m)) for m in modules] == state


def test_not_training_or_without_augments_is_cls_data_preprocessor():
    tl, ref = (_preprocessor(t) for t in TYPES)
    out, ref_out = tl(_data(4), training=False), ref(_data(4), training=False)
    assert torch.equal(out['inputs'], ref_out['inputs'])
    assert set(out) == {'inputs', 'data_samples'}
    assert all(torch.equal(a.gt_score, b.gt_score) for a, b in zip(
        out['data_samples'], ref_out['data_samples']))
    out = MODELS.build(dict(type='TLAlignDataPreprocessor', **NORM))(
        _data(2), training=True)
    assert set(out) == {'inputs', 'data_samples'}
    assert all('gt_score' not in s for s in out['data_samples'])



@pytest.mark.parametrize('augments, onehot', [
    (dict(augments=[dict(type='CutMix', alpha=1.0)]), True), (None, False)])
def test_batch_augments_switch_to_onehot_as_mmpretrains_do(augments, onehot):
    """mmpretrain's own ``ClsDataPreprocessor.__init__`` turns ``to_onehot``
    on for batch augments; the augments that run are ours, which record."""
    from tlalign_mm.mixing.wrapper import TLRandomBatchAugment
    pre = MODELS.build(dict(type='TLAlignDataPreprocessor', num_classes=10,
                            to_onehot=False, batch_augments=augments))
    assert pre.to_onehot is onehot
    assert isinstance(pre.batch_augments, TLRandomBatchAugment) is onehot
