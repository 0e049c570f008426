"""TLRandomBatchAugment and the BATCH_AUGMENTS registrations."""
import inspect

import pytest
import torch
import torch.nn.functional as F
from mmpretrain.models.utils.batch_augments import (
    CutMix,
    Mixup,
    RandomBatchAugment,
    ResizeMix,
)
from mmpretrain.registry import BATCH_AUGMENTS

import tlalign_mm.mixing as mixing
from tlalign_mm.mixing import (
    TLCutMix,
    TLMixup,
    TLRandomBatchAugment,
    TLResizeMix,
)

AUG_CFGS = [
    dict(type='TLCutMix', alpha=1.0),
    dict(
        type='TLCutMix',
        alpha=1.0,
        cutmix_minmax=[0.2, 0.8],
        correct_lam=False),
    dict(type='TLTokenCutMix', alpha=1.0, patch_size=14),
    dict(type='TLMixup', alpha=0.8),
    dict(
        type='TLResizeMix',
        alpha=1.0,
        lam_min=0.2,
        lam_max=0.6,
        interpolation='bicubic'),
    dict(type='TLPatchMix', alpha=1.0, patch_size=8),
    dict(type='TLBlockMix', alpha=1.0, min_num_patches=2, min_aspect=0.5),
]


@pytest.mark.parametrize('cfg', AUG_CFGS, ids=lambda c: c['type'])
def test_builds_from_config(cfg):
    aug = BATCH_AUGMENTS.build(cfg)
    assert type(aug).__name__ == cfg['type']
    assert callable(aug.mix_with_record)
    inputs = torch.rand(3, 3, 32, 32)
    scores = F.one_hot(torch.tensor([0, 1, 2]), 3)
    mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
    assert mixed.shape == inputs.shape and record.num_sources == 2


def test_every_recording_augment_is_registered():
    recording = [
        obj for name, obj in vars(mixing).items() if inspect.isclass(obj)
        and hasattr(obj, 'mix_with_record') and not name.startswith('Base')
        and obj is not TLRandomBatchAugment  # the per-batch choice
    ]
    assert len(recording) >= 5
    for cls in recording:
        assert BATCH_AUGMENTS.get(cls.__name__) is cls
        assert cls.__name__ in {cfg['type'] for cfg in AUG_CFGS}


@pytest.mark.parametrize('cfg', AUG_CFGS, ids=lambda c: c['type'])
def test_record_mode_is_the_augment_name(cfg):
    """One naming rule for MixRecord.mode: the augment's class name without
    ``TL``, lower case (``TLTokenCutMix`` -> ``'tokencutmix'``)."""
    aug = BATCH_AUGMENTS.build(cfg)
    _, _, record = aug.mix_with_record(*_batch())
    assert record.mode == cfg['type'][2:].lower()


def _batch(batch_size=6, img_size=32, num_classes=5):
    g = torch.Generator().manual_seed(7)
    inputs = torch.randn(batch_size, 3, img_size, img_size, generator=g)
    labels = torch.randint(0, num_classes, (batch_size, ), generator=g)
    return inputs, F.one_hot(labels, num_classes)


@pytest.mark.parametrize('prefix', ['TL', ''])
def test_random_batch_augment_matches_mmpretrain(prefix, check_record,
                                                 mix_like_mmpretrain):
    """From the recording names or mmpretrain's own (built as the
    recording variants), the same mixes as RandomBatchAugment."""
    inputs, scores = _batch()
    ref = RandomBatchAugment(
        [dict(type='CutMix', alpha=1.0),
         dict(type='Mixup', alpha=0.8)],
        probs=[0.4, 0.4])
    probs = [0.4, 0.4]
    tl = TLRandomBatchAugment(
        [dict(type=f'{prefix}CutMix', alpha=1.0),
         dict(type=f'{prefix}Mixup', alpha=0.8)],
        probs=probs)
    assert [type(a) for a in tl.augments] == [TLCutMix, TLMixup, type(None)]
    assert probs == [0.4, 0.4], 'the config list was modified'
    modes = set()
    for s in range(20):
        mixed, mixed_scores, record = mix_like_mmpretrain(
            tl, ref, inputs, scores, s)
        modes.add(record.mode)
        check_record(
            record,
            inputs,
            scores,
            mixed,
            mixed_scores,
            exact_pixels=record.mode != 'mixup')
        if record.mode == 'none':
            assert record.num_sources == 1
            assert torch.equal(record.source_index[:, 0],
                               torch.arange(inputs.size(0)))
    assert modes == {'cutmix', 'mixup', 'none'}


def test_random_batch_augment_accepts_instances_and_no_probs(seed):
    inputs, scores = _batch(batch_size=1)
    tl = TLRandomBatchAugment(TLCutMix(alpha=1.0))
    seed(0)
    mixed, mixed_scores, record = tl.mix_with_record(inputs, scores)
    assert record.mode == 'cutmix'
    assert record.source_index.tolist() == [[0, 0]]


class OwnMix(CutMix):
    """A user's augment, with no recording variant."""


@pytest.mark.parametrize('plain', [dict(type=OwnMix, alpha=1.0),
                                   Mixup(alpha=1.0), ResizeMix(alpha=1.0)],
                         ids=['own', 'built-Mixup', 'built-ResizeMix'])
def test_an_augment_with_no_recording_variant_is_refused(plain):
    with pytest.raises(TypeError) as err:
        TLRandomBatchAugment([dict(type='Mixup', alpha=0.8), plain],
                             probs=[0.5, 0.5])
    name = 'OwnMix' if isinstance(plain, dict) else type(plain).__name__
    message = str(err.value)
    assert f'`{name}` has no recording variant' in message
    assert "mmpretrain's Mixup, CutMix and ResizeMix" in message
    assert 'TLTokenCutMix, TLPatchMix and TLBlockMix' in message
    assert ('as a config' in message) == (not isinstance(plain, dict))


def test_plain_cutmix_still_is_mmpretrain():
    """Our subclasses do not change the mmpretrain classes."""
    assert not hasattr(CutMix, 'mix_with_record')
    assert not hasattr(Mixup, 'mix_with_record')
    assert not hasattr(ResizeMix, 'mix_with_record')
    assert issubclass(TLCutMix, CutMix) and issubclass(TLMixup, Mixup)
    assert issubclass(TLResizeMix, ResizeMix)
