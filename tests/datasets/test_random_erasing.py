"""ZhongRandomErasing equals the SPT/LSA code's RandomErasing (after its
Normalize) on fixed seeds, once our data preprocessor has normalised."""
import math
import random

import numpy as np
import pytest
import torch
from mmpretrain.registry import TRANSFORMS

import tlalign_mm  # noqa: F401


class OriginalRandomErasing:
    """aanna0701/SPT_LSA_ViT@54bd796 utils/random_erasing.py:8-46,
    verbatim (commented-out lines left out)."""

    def __init__(self, probability=0.5, sl=0.02, sh=0.4, r1=0.3,
                 mean=[0.4914, 0.4822, 0.4465]):
        self.EPSILON = probability
        self.mean = mean
        self.sl = sl
        self.sh = sh
        self.r1 = r1

    def __call__(self, img):
        if random.uniform(0, 1) > self.EPSILON:
            return img
        for _ in range(100):
            area = img.size()[1] * img.size()[2]
            target_area = random.uniform(self.sl, self.sh) * area
            aspect_ratio = random.uniform(self.r1, 1/self.r1)
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if w < img.size()[2] and h < img.size()[1]:
                x1 = random.randint(0, img.size()[1] - h)
                y1 = random.randint(0, img.size()[2] - w)
                if img.size()[0] == 3:
                    img[0, x1:x1+h, y1:y1+w] = self.mean[0]
                    img[1, x1:x1+h, y1:y1+w] = self.mean[1]
                    img[2, x1:x1+h, y1:y1+w] = self.mean[2]
                else:
                    img[0, x1:x1+h, y1:y1+w] = self.mean[1]
                return img
        return img


# CIFAR-10 (utils/dataloader.py:12), in 0..255 as our data preprocessor
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
PIX_MEAN = np.array([255 * m for m in MEAN])
PIX_STD = np.array([255 * s for s in STD])


@pytest.mark.parametrize('prob, size', [(0.25, (32, 32)), (1.0, (64, 48))])
def test_equals_the_original_on_fixed_seeds(prob, size):
    ours = TRANSFORMS.build(dict(
        type='ZhongRandomErasing', erase_prob=prob, max_area_ratio=0.4,
        min_aspect=0.3,
        fill=[m + s * v for m, s, v in zip(PIX_MEAN, PIX_STD, MEAN)]))
    original = OriginalRandomErasing(probability=prob, sh=0.4, r1=0.3,
                                     mean=MEAN)
    rng = np.random.RandomState(0)
    erased = 0
    for seed in range(100):
        img = rng.randint(0, 256, size + (3, )).astype(np.uint8)
        # the original: ToTensor, Normalize, RandomErasing
        tensor = (torch.from_numpy(img).permute(2, 0, 1).float() / 255 -
                  torch.tensor(MEAN)[:, None, None]) / \
            torch.tensor(STD)[:, None, None]
        random.seed(seed)
        want = original(tensor.clone())
        # ours: the transform on pixels, then the preprocessor's Normalize
        random.seed(seed)
        out = ours(dict(img=img.copy()))['img']
        assert out.dtype == np.float32
        got = torch.from_numpy((out - PIX_MEAN) / PIX_STD).permute(2, 0, 1)
        # float64 vs float32 arithmetic on normalised values of order 2:
        # 1e-5 is about 40 ulp there, the erased fill's round trip included
        assert torch.allclose(got.float(), want, rtol=0, atol=1e-5)
        erased += int(not torch.equal(want, tensor))
    # all, or about a quarter (binomial sd 4.3) of 100
    assert erased == 100 if prob == 1.0 else 10 < erased < 40


@pytest.mark.parametrize('kwargs,match', [
    (dict(fill=[0, 0, 0], min_aspect=3.), 'min_aspect'),
    (dict(fill=[0]), 'fill')])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TRANSFORMS.build(dict(type='ZhongRandomErasing', **kwargs))
