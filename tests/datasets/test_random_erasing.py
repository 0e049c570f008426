"""ZhongRandomErasing equals the SPT/LSA code's RandomErasing (after its
Normalize) on fixed seeds, once our data preprocessor has normalised."""
import math
import random

import numpy as np
import pytest
import torch
from mmpretrain.registry import TRANSFORMS

from tlalign_mm.datasets import Digits, MultiPassSampler


def original_erasing(img, probability, sl=0.02, sh=0.4, r1=0.3,
                     mean=(0.4914, 0.4822, 0.4465)):
    """aanna0701/SPT_LSA_ViT@54bd796 utils/random_erasing.py:8-46, verbatim
    but as a function (``self.`` dropped) on 3-channel images (its
    1-channel branch left out)."""
    if random.uniform(0, 1) > probability:
        return img
    for _ in range(100):
        area = img.size()[1] * img.size()[2]
        target_area = random.uniform(sl, sh) * area
        aspect_ratio = random.uniform(r1, 1/r1)
        h = int(round(math.sqrt(target_area * aspect_ratio)))
        w = int(round(math.sqrt(target_area / aspect_ratio)))
        if w < img.size()[2] and h < img.size()[1]:
            x1 = random.randint(0, img.size()[1] - h)
            y1 = random.randint(0, img.size()[2] - w)
            for c in range(3):
                img[c, x1:x1+h, y1:y1+w] = mean[c]
            return img
    return img


def erasing(**kwargs):
    return TRANSFORMS.build(dict(type='ZhongRandomErasing', **kwargs))


# CIFAR-10 (utils/dataloader.py:12), in 0..255 as our data preprocessor
MEAN, STD = np.array([0.4914, 0.4822, 0.4465]), np.array([0.247, 0.2435,
                                                          0.2616])


@pytest.mark.parametrize('prob, size', [(0.25, (32, 32)), (1.0, (64, 48))])
def test_equals_the_original_on_fixed_seeds(prob, size):
    ours = erasing(erase_prob=prob, max_area_ratio=0.4, min_aspect=0.3,
                   fill=list(255 * MEAN + 255 * STD * MEAN))
    rng, erased = np.random.RandomState(0), 0
    for seed in range(100):
        img = rng.randint(0, 256, size + (3, )).astype(np.uint8)
        # the original: ToTensor, Normalize, RandomErasing; ours: the
        # transform on pixels, then the preprocessor's Normalize
        tensor = torch.from_numpy(
            (img / 255 - MEAN) / STD).permute(2, 0, 1).float()
        random.seed(seed)
        want = original_erasing(tensor.clone(), prob)
        random.seed(seed)
        out = ours(dict(img=img.copy()))['img']
        assert out.dtype == np.float32
        got = torch.from_numpy((out - 255 * MEAN) / (255 * STD))
        # float64 vs float32 arithmetic on normalised values of order 2:
        # 1e-5 is about 40 ulp there, the erased fill's round trip included
        assert torch.allclose(got.permute(2, 0, 1).float(), want, rtol=0,
                              atol=1e-5)
        erased += int(not torch.equal(want, tensor))
    # all, or about a quarter (binomial sd 4.3) of 100
    assert erased == 100 if prob == 1.0 else 10 < erased < 40


@pytest.mark.parametrize('build,kwargs,match', [
    (Digits, dict(split='val'), 'split'), (Digits, dict(scale=0), 'scale'),
    (Digits, dict(scale=(16, )), 'scale'),
    (Digits, dict(scale=16, canvas=(20, 12)), 'smaller than the digit'),
    (Digits, dict(canvas=16, placement='edge'), 'placement'),
    (Digits, dict(placement='random'), 'give `canvas`'),
    (Digits, dict(canvas=16, placement='random', max_shift=-1),
     'max_shift'),
    (MultiPassSampler, dict(dataset=range(10), num_passes=0), 'num_passes'),
    (MultiPassSampler, dict(dataset=range(0)), 'empty'),
    (erasing, dict(fill=[0, 0, 0], min_aspect=3.), 'min_aspect'),
    (erasing, dict(fill=[0]), 'fill')])
def test_bad_arguments_are_named(build, kwargs, match):
    """The datasets' builds and transforms (the sampler with seed=0)."""
    with pytest.raises(ValueError, match=match):
        build(**kwargs, **({'seed': 0} if build is MultiPassSampler else {}))
