"""Every batch augmentation's parameters are checked when it is built (from
a config dict, as a config builds it), with a message naming the argument
and what it should be: long before any forward."""
import pytest
from mmpretrain.registry import BATCH_AUGMENTS, MODELS

import tlalign_mm.mixing  # noqa: F401  (registration)
from tlalign_mm.mixing import TLRandomBatchAugment

ALPHA_OWNERS = ['TLCutMix', 'TLMixup', 'TLResizeMix', 'TLTokenCutMix',
                'TLPatchMix', 'TLBlockMix']


@pytest.mark.parametrize('alpha', [0, -1.0, float('nan'), float('inf'),
                                   'one', None, True])
@pytest.mark.parametrize('owner', ALPHA_OWNERS)
def test_alpha_must_be_positive(owner, alpha):
    with pytest.raises(ValueError) as error:
        BATCH_AUGMENTS.build(dict(type=owner, alpha=alpha))
    assert str(error.value).startswith(f'{owner}: alpha must be a positive '
                                       'number')
    assert repr(alpha) in str(error.value)


@pytest.mark.parametrize('owner', ALPHA_OWNERS)
def test_an_int_alpha_is_a_number_too(owner):
    """mmpretrain's own asserts refuse alpha=1 (not a float)."""
    aug = BATCH_AUGMENTS.build(dict(type=owner, alpha=1))
    assert aug.alpha == 1.0 and isinstance(aug.alpha, float)


@pytest.mark.parametrize('owner', ['TLCutMix', 'TLResizeMix'])
@pytest.mark.parametrize('minmax', [[0.5], [0.8, 0.2], [0, 0.5], [0.2, 1.5],
                                    'wide', [0.2, float('nan')]])
def test_cutmix_minmax(owner, minmax):
    with pytest.raises(ValueError, match=f'{owner}: cutmix_minmax must be '
                       r'\[min, max\] with 0 < min < max <= 1'):
        BATCH_AUGMENTS.build(dict(type=owner, alpha=1.0,
                                  cutmix_minmax=minmax))
    aug = BATCH_AUGMENTS.build(dict(type=owner, alpha=1.0,
                                    cutmix_minmax=(0.2, 0.8)))
    assert aug.cutmix_minmax == [0.2, 0.8]
    with pytest.raises(ValueError, match='correct_lam must be True or False'):
        BATCH_AUGMENTS.build(dict(type=owner, alpha=1.0,
                                  correct_lam='yes'))


@pytest.mark.parametrize('lam_min, lam_max', [
    (0.5, 0.3), (-0.1, 0.8), (0.1, 1.0), (0.1, 1.2), (0.1, float('nan')),
    ('low', 0.8), (0.1, None), (False, 0.8)])
def test_resizemix_lam_range(lam_min, lam_max):
    with pytest.raises(ValueError) as error:
        BATCH_AUGMENTS.build(dict(type='TLResizeMix', alpha=1.0,
                                  lam_min=lam_min, lam_max=lam_max))
    message = str(error.value)
    assert message.startswith('TLResizeMix: lam_min and lam_max must '
                              'satisfy 0 <= lam_min <= lam_max < 1')
    assert f'lam_min={lam_min!r}, lam_max={lam_max!r}' in message
    aug = BATCH_AUGMENTS.build(dict(type='TLResizeMix', alpha=1.0,
                                    lam_min=0, lam_max=0))
    assert (aug.lam_min, aug.lam_max) == (0.0, 0.0)


@pytest.mark.parametrize('mode', ['nearest', 'area', 'linear', 'trilinear',
                                  'Bilinear', None])
def test_resizemix_interpolation(mode):
    """Modes mmpretrain's docstring lists but its ``F.interpolate(...,
    align_corners=False)`` call refuses on image batches."""
    with pytest.raises(ValueError, match="TLResizeMix: interpolation must be "
                       r"one of \('bilinear', 'bicubic'\)"):
        BATCH_AUGMENTS.build(dict(type='TLResizeMix', alpha=1.0,
                                  interpolation=mode))


@pytest.mark.parametrize('owner', ['TLPatchMix', 'TLBlockMix'])
@pytest.mark.parametrize('patch_size', [0, -16, 4.0, None])
def test_patch_size(owner, patch_size):
    with pytest.raises(ValueError, match=f'{owner}: patch_size must be a '
                       'positive int'):
        BATCH_AUGMENTS.build(dict(type=owner, alpha=1.0,
                                  patch_size=patch_size))


@pytest.mark.parametrize('kwargs, message', [
    (dict(min_num_patches=0), 'min_num_patches must be a positive int'),
    (dict(min_num_patches=4, max_num_patches=2),
     r'max_num_patches \(2\) must be >= min_num_patches \(4\)'),
    (dict(min_aspect=0), 'min_aspect must be a positive number'),
    (dict(min_aspect=0.5, max_aspect=0.3),
     r'max_aspect \(0.3\) must be >= min_aspect \(0.5\)'),
    (dict(max_attempts=0), 'max_attempts must be a positive int'),
])
def test_block_mix_arguments(kwargs, message):
    with pytest.raises(ValueError, match='TLBlockMix: ' + message):
        BATCH_AUGMENTS.build(dict(type='TLBlockMix', alpha=1.0, **kwargs))


CUTMIX, MIXUP = dict(type='TLCutMix', alpha=1.0), dict(type='TLMixup',
                                                         alpha=0.8)


@pytest.mark.parametrize('probs, message', [
    ([0.5], r'has 1 value\(s\) for 2 augment\(s\)'),
    ([0.7, 0.6], 'sum to 1.3 > 1'),
    ([-0.1, 0.5], r'must be probabilities in \[0, 1\]'),
    ([float('nan'), 0.5], r'must be probabilities in \[0, 1\]'),
    ('half', r'must be probabilities in \[0, 1\]'),
])
def test_probs(probs, message):
    with pytest.raises(ValueError, match='TLRandomBatchAugment: probs '
                       + message):
        TLRandomBatchAugment([CUTMIX, MIXUP], probs)
    assert TLRandomBatchAugment([CUTMIX, MIXUP], [0.5, 0.5]).probs == [
        0.5, 0.5, 0.0]
    assert TLRandomBatchAugment(CUTMIX, 0.25).probs == [0.25, 0.75]


def test_empty_augments():
    with pytest.raises(ValueError, match='augments is empty'):
        TLRandomBatchAugment([])


def test_data_preprocessor_batch_augments_is_a_dict():
    with pytest.raises(TypeError, match='batch_augments must be a dict'):
        MODELS.build(dict(type='TLAlignDataPreprocessor', num_classes=3,
                          batch_augments=[CUTMIX]))
