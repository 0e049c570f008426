"""Every batch augmentation's parameters are checked when it is built (from
a config dict, as a config builds it), with a message naming the argument
and what it should be: long before any forward."""
import pytest
from mmpretrain.registry import BATCH_AUGMENTS, MODELS

import tlalign_mm.mixing  # noqa: F401  (registration)
from tlalign_mm.mixing import TLRandomBatchAugment

OWNERS = ['TLCutMix', 'TLMixup', 'TLResizeMix', 'TLTokenCutMix',
          'TLPatchMix', 'TLBlockMix']
MINMAX = r'cutmix_minmax must be \[min, max\] with 0 < min < max <= 1'
LAM = 'lam_min and lam_max must satisfy 0 <= lam_min <= lam_max < 1'
INTERPOLATION = r"interpolation must be one of \('bilinear', 'bicubic'\)"
BAD = [  # (type, its arguments but alpha=1.0, the message after 'type: ')
    *[(o, dict(alpha=a), f'alpha must be a positive number.*{a!r}') for o in
      OWNERS for a in (0, -1., float('nan'), float('inf'), 'one', None, True)],
    *[(o, dict(cutmix_minmax=m), MINMAX) for o in OWNERS[:3:2]
      for m in ([0.5], [0.8, 0.2], [0, 0.5], [0.2, 1.5], 'wide')],
    *[(o, dict(correct_lam='yes'), 'correct_lam must be True or False')
      for o in OWNERS[:3:2]],
    *[('TLResizeMix', dict(lam_min=lo, lam_max=hi), f'{LAM}.*lam_min={lo!r}')
      for lo, hi in [(0.5, 0.3), (-0.1, 0.8), (0.1, 1.0), (0.1, float('nan')),
                     ('low', 0.8), (0.1, None), (False, 0.8)]],
    # modes mmpretrain's docstring lists but its F.interpolate(...,
    # align_corners=False) call refuses on image batches
    *[('TLResizeMix', dict(interpolation=m), INTERPOLATION)
      for m in ('nearest', 'area', 'linear', 'Bilinear', None)],
    *[(o, dict(patch_size=p), 'patch_size must be a positive int')
      for o in OWNERS[3:] for p in (0, -16, 4.0)],
    ('TLTokenCutMix', dict(box_units='token'), 'box_units'),
    ('TLTokenCutMix', dict(box_units='tokens', cutmix_minmax=[0.2, 0.8]),
     'cutmix_minmax'),
    ('TLBlockMix', dict(min_num_patches=0), 'min_num_patches must be a '
     'positive int'),
    ('TLBlockMix', dict(min_num_patches=4, max_num_patches=2),
     r'max_num_patches \(2\) must be >= min_num_patches \(4\)'),
    ('TLBlockMix', dict(min_aspect=0), 'min_aspect must be a positive number'),
    ('TLBlockMix', dict(min_aspect=0.5, max_aspect=0.3),
     r'max_aspect \(0.3\) must be >= min_aspect \(0.5\)'),
    ('TLBlockMix', dict(max_attempts=0), 'max_attempts must be a positive '
     'int')]


@pytest.mark.parametrize('owner,kwargs,message', BAD)
def test_bad_arguments_are_named(owner, kwargs, message):
    with pytest.raises(ValueError, match=f'^{owner}: {message}'):
        BATCH_AUGMENTS.build(dict(dict(type=owner, alpha=1.0), **kwargs))


@pytest.mark.parametrize('owner,kwargs,attrs', [
    # an int alpha (mmpretrain's own asserts refuse alpha=1), range edges
    *[(o, {}, dict(alpha=1.0)) for o in OWNERS],
    *[(o, dict(cutmix_minmax=(0.2, 0.8)), dict(cutmix_minmax=[0.2, 0.8]))
      for o in OWNERS[:3:2]],
    ('TLResizeMix', dict(lam_min=0, lam_max=0), dict(lam_min=0., lam_max=0.))])
def test_good_edge_values_are_accepted(owner, kwargs, attrs):
    aug = BATCH_AUGMENTS.build(dict(type=owner, alpha=1, **kwargs))
    assert isinstance(aug.alpha, float)
    assert {k: getattr(aug, k) for k in attrs} == attrs


CUTMIX, MIXUP = dict(type='TLCutMix', alpha=1.0), dict(type='TLMixup',
                                                         alpha=0.8)


@pytest.mark.parametrize('augments,probs,message', [
    ([CUTMIX, MIXUP], [0.5], r'probs has 1 value\(s\) for 2 augment\(s\)'),
    ([CUTMIX, MIXUP], [0.7, 0.6], 'probs sum to 1.3 > 1'),
    ([CUTMIX, MIXUP], [-0.1, 0.5], r'probs must be probabilities in \[0, 1\]'),
    ([CUTMIX, MIXUP], [float('nan'), 0.5], 'probs must be probabilities'),
    ([CUTMIX, MIXUP], 'half', 'probs must be probabilities'),
    ([], None, 'augments is empty')])
def test_random_batch_augment_arguments(augments, probs, message):
    with pytest.raises(ValueError, match='TLRandomBatchAugment: ' + message):
        TLRandomBatchAugment(augments, probs)
    given = [0.5, 0.5]
    assert TLRandomBatchAugment([CUTMIX, MIXUP], given).probs == [
        0.5, 0.5, 0.0]
    assert given == [0.5, 0.5], 'the config list was modified'
    assert TLRandomBatchAugment(CUTMIX, 0.25).probs == [0.25, 0.75]


def test_data_preprocessor_batch_augments_is_a_dict():
    with pytest.raises(TypeError, match='batch_augments must be a dict'):
        MODELS.build(dict(type='TLAlignDataPreprocessor', num_classes=3,
                          batch_augments=[CUTMIX]))
