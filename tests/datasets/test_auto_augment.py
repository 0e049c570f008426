"""HParamsAutoAugment: mmpretrain's AutoAugment whose ops get its hparams
(mmpretrain 1.2.0's drops them, auto_augment.py:74-76), with the same
draws, and an hparams key that reaches no op refused."""
import re

import numpy as np
import pytest
from mmpretrain.datasets.transforms.auto_augment import AUTOAUG_POLICIES
from mmpretrain.registry import TRANSFORMS

import tlalign_mm  # noqa: F401

POLICIES = [
    [dict(type='PILColorTransform', magnitude=0.3, prob=0.7),
     dict(type='Shear', magnitude=0.2, prob=0.6)],
    [dict(type='PILRotate', angle=20., pad_val=0, prob=0.8),
     dict(type='Equalize', prob=0.5)],
    [dict(type='PILContrast', magnitude=0.5, prob=0.9,
          channel_order='bgr')],
]
HPARAMS = dict(pad_val=7, channel_order='rgb')


def ops(aug):
    return [op for sub in aug.transforms for op in sub.transforms]


def test_each_op_gets_the_hparams_it_takes_and_keeps_its_own():
    aug = TRANSFORMS.build(dict(type='HParamsAutoAugment', policies=POLICIES,
                                hparams=HPARAMS))
    color, shear, rotate, equalize, contrast = ops(aug)
    assert color.channel_order == 'rgb' and shear.pad_val == 7
    assert (rotate.pad_val, rotate.channel_order) == (0, 'rgb')  # its own
    assert contrast.channel_order == 'bgr'  # its own
    assert not hasattr(equalize, 'pad_val')
    # mmpretrain's own AutoAugment drops them (when this fails, mmpretrain
    # has fixed it and the configs can name AutoAugment again)
    stock = ops(TRANSFORMS.build(dict(type='AutoAugment', policies=POLICIES,
                                      hparams=HPARAMS)))
    assert (stock[0].channel_order, stock[1].pad_val) == ('bgr', 128)


def test_the_same_draws_as_autoaugment_with_the_hparams_on_each_op():
    aug = TRANSFORMS.build(dict(type='HParamsAutoAugment', policies=POLICIES,
                                hparams=HPARAMS))
    written = [
        [dict(POLICIES[0][0], channel_order='rgb'),
         dict(POLICIES[0][1], pad_val=7)],
        [dict(POLICIES[1][0], channel_order='rgb'), POLICIES[1][1]],
        POLICIES[2]]
    stock = TRANSFORMS.build(dict(type='AutoAugment', policies=written))
    assert [repr(op) for op in ops(aug)] == [repr(op) for op in ops(stock)]
    img = np.random.RandomState(0).randint(0, 256, (12, 12, 3), np.uint8)
    for seed in range(40):
        np.random.seed(seed)
        ours = aug(dict(img=img.copy()))['img']
        np.random.seed(seed)
        np.testing.assert_array_equal(ours, stock(dict(img=img.copy()))[
            'img'])


@pytest.mark.parametrize('hparams, unused', [
    (dict(pad_val=7, chanel_order='rgb'), ['chanel_order']),  # no op's
    (dict(pad_val=7, interpolation='bicubic'), ['interpolation']),
])
def test_an_hparams_key_that_reaches_no_op_is_refused(hparams, unused):
    """A misspelt key, or one that every op taking it sets itself: mmpretrain
    merges neither, silently."""
    policies = [[dict(type='Shear', magnitude=0.2, interpolation='nearest'),
                 dict(type='PILColorTransform', magnitude=0.3)]]
    with pytest.raises(ValueError,
                       match=re.escape(f'hparams {unused} reach no op')):
        TRANSFORMS.build(dict(type='HParamsAutoAugment', policies=policies,
                              hparams=hparams))
    # not given: AutoAugment's default dict(pad_val=128), unchecked
    policy = [[dict(type='PILColorTransform', magnitude=0.3)]]
    assert ops(TRANSFORMS.build(dict(type='HParamsAutoAugment',
                                     policies=policy)))[0].magnitude == 0.3


def test_preset_policies_by_name():
    aug = TRANSFORMS.build(dict(type='HParamsAutoAugment',
                                policies='imagenet', hparams=dict(pad_val=3)))
    assert len(aug.transforms) == len(AUTOAUG_POLICIES['imagenet'])
    assert {op.pad_val for op in ops(aug) if hasattr(op, 'pad_val')} == {3}
    with pytest.raises(ValueError, match="unknown policies 'cifar'"):
        TRANSFORMS.build(dict(type='HParamsAutoAugment', policies='cifar'))
