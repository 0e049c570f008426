"""Every recording augment, built from a config as a recipe builds it:
mmpretrain's CutMix / Mixup / ResizeMix / RandomBatchAugment bit for bit
(images, scores and the random state after), the drop-in ``__call__`` too,
and a MixRecord that rebuilds the batch; augments with no recording variant
are refused at build."""
import pytest
import torch
from mmpretrain.models.utils import batch_augments as mmpre
from mmpretrain.models.utils.batch_augments import CutMix, Mixup, ResizeMix
from mmpretrain.registry import BATCH_AUGMENTS

import tlalign_mm.mixing as mixing
from tlalign_mm.mixing import TLCutMix, TLRandomBatchAugment

from .conftest import mix_and_check, random_batch, seed

# (batch size, H, W): odd batch, batch of one, a size not a multiple of 16.
SHAPES = [(5, 32, 48), (1, 32, 32), (3, 21, 35)]
SAME = [  # the recording augment's arguments are mmpretrain's
    ('CutMix', dict(alpha=1.0)), ('Mixup', dict(alpha=0.8)),
    ('CutMix', dict(alpha=0.5, correct_lam=False)),
    ('CutMix', dict(alpha=1.0, cutmix_minmax=[0.2, 0.8])),
    ('ResizeMix', dict(alpha=1.0)), ('ResizeMix', dict(alpha=1.0,
                                                       correct_lam=False)),
    ('ResizeMix', dict(alpha=0.4, lam_min=0.3, lam_max=0.6)),
    *[('ResizeMix', dict(k, interpolation='bicubic')) for k in [
        dict(alpha=2.0, lam_min=0.0, lam_max=0.95),
        dict(alpha=1.0, cutmix_minmax=[0.3, 0.9])]]]
CASES = [(dict(type='TL' + t, **k), dict(type=t, **k)) for t, k in SAME] + [
    # the per-batch choice, 'no mixing' included, from recording names or
    # mmpretrain's own (built as their recording variants)
    ([dict(type='CutMix', alpha=1.0), dict(type='TLMixup', alpha=0.8)],
     [dict(type='CutMix', alpha=1.0), dict(type='Mixup', alpha=0.8)]),
    ([dict(type='TLMixup', alpha=0.8), dict(type='ResizeMix', alpha=1.0)],
     [dict(type='Mixup', alpha=0.8), dict(type='ResizeMix', alpha=1.0)]),
    *[(dict(type=t, alpha=1.0, **k), None) for t, k in [
        ('TLTokenCutMix', dict(patch_size=8)), ('TLPatchMix', dict(
            patch_size=8)), ('TLTokenCutMix', dict(patch_size=4,
                                                   box_units='tokens')),
        ('TLBlockMix', dict(patch_size=4, min_num_patches=2, min_aspect=.5))]]]


def build(cfg, ref=False):
    return (mmpre.RandomBatchAugment if ref else TLRandomBatchAugment)(
        cfg, probs=[0.4, 0.4]) if isinstance(cfg, list) else (
            cfg and BATCH_AUGMENTS.build(cfg))


@pytest.mark.parametrize('cfg,ref_cfg', CASES, ids=lambda c: str(c)[:40])
@pytest.mark.parametrize('shape', SHAPES)
@pytest.mark.parametrize('dtype', [torch.float32, torch.uint8])
def test_mixes_as_mmpretrain_and_records_it(cfg, ref_cfg, shape, dtype):
    aug, ref = build(cfg), build(ref_cfg, ref=True)
    inputs, scores = random_batch(*shape, dtype=dtype)
    kwargs = {k: v for k, v in (cfg if isinstance(cfg, dict) else {}).items()
              if k in ('correct_lam', 'interpolation')}
    modes = {mix_and_check(aug, inputs, scores, s, ref, **kwargs).mode
             for s in range(12 if isinstance(cfg, list) else 6)}
    # One naming rule for MixRecord.mode: the class name without TL, lower.
    assert modes == {type(a).__name__[2:].lower() if a else 'none'
                     for a in getattr(aug, 'augments', [aug])}


def test_every_recording_augment_is_registered_and_tested():
    recording = [cls for name, cls in vars(mixing).items()
                 if hasattr(cls, 'mix_with_record') and 'Base' not in name
                 and cls is not TLRandomBatchAugment]
    assert {cls.__name__ for cls in recording} == {
        c['type'] for c, _ in CASES if isinstance(c, dict)}
    assert all(BATCH_AUGMENTS.get(cls.__name__) is cls for cls in recording)
    # (mmpretrain's classes stay without mix_with_record: their instances,
    # and a subclass of CutMix, are refused, the test after next.)


def test_random_batch_augment_takes_an_instance_without_probs():
    """(mmpretrain's names built as the recording variants, 'no mixing'
    appended: test_mixing_data_preprocessor.py; the probs list kept:
    test_mixing_validation.py.)"""
    aug = TLRandomBatchAugment(TLCutMix(alpha=1.0))  # no probs: always
    seed(0)
    assert aug.mix_with_record(*random_batch(4, 16, 16))[2].mode == 'cutmix'


class OwnMix(CutMix):
    """A user's augment, with no recording variant."""


@pytest.mark.parametrize('plain', [dict(type=OwnMix, alpha=1.0),
                                   Mixup(alpha=1.0), ResizeMix(alpha=1.0)],
                         ids=['own', 'built-Mixup', 'built-ResizeMix'])
def test_an_augment_with_no_recording_variant_is_refused(plain):
    name = 'OwnMix' if isinstance(plain, dict) else type(plain).__name__
    with pytest.raises(TypeError, match=f'(?s)`{name}` has no recording '
                       "variant.*mmpretrain's Mixup, CutMix and ResizeMix.*"
                       'TLTokenCutMix, TLPatchMix and TLBlockMix') as err:
        TLRandomBatchAugment([dict(type='Mixup', alpha=0.8), plain],
                             probs=[0.5, 0.5])
    assert ('as a config' in str(err.value)) != isinstance(plain, dict)


def test_resizemix_empty_box_is_a_clear_error():
    """On 2x2 images the box side ``int(2 * sqrt(1 - lam)) // 2`` is 0:
    mmpretrain fails inside F.interpolate (RuntimeError: sizes should be
    greater than 0), we say why."""
    inputs, scores = random_batch(3, 2, 2)
    seed(0)
    with pytest.raises(ValueError, match=r'TLResizeMix: the box drawn for 2x2'
                       r' images is empty .*smaller lam_max \(now 0.8\)'):
        BATCH_AUGMENTS.build(dict(type='TLResizeMix', alpha=1.0)
                             ).mix_with_record(inputs, scores)
