"""The SPT/LSA configs' AutoAugment Rotate, Color and Contrast equal the
original's PIL ops on the arrays each dataset hands them (mmpretrain's
CIFAR: RGB; Tiny-ImageNet through LoadImageFromFile: BGR)."""
import numpy as np
import pytest
from mmpretrain.datasets.transforms.auto_augment import merge_hparams
from mmpretrain.registry import TRANSFORMS
from PIL import Image, ImageEnhance

import tlalign_mm  # noqa: F401
from tests.test_paper_configs import load
from tests.test_sl_vit_configs import CIFAR10_POLICY, IMAGENET_POLICY, RANGES

# aanna0701/SPT_LSA_ViT@54bd796 utils/transforms.py:48-53, 56-58, 71-73,
# verbatim but for random.choice([-1, 1]), passed in as `s` (Rotate has
# none).
ORIGINAL = dict(
    rotate=lambda x, m, s: Image.composite(
        rot := x.convert("RGBA").rotate(m),
        Image.new("RGBA", rot.size, (128,) * 4), rot).convert(x.mode),
    color=lambda x, m, s: ImageEnhance.Color(x).enhance(1 + m * s),
    contrast=lambda x, m, s: ImageEnhance.Contrast(x).enhance(1 + m * s))


@pytest.mark.parametrize('op', list(ORIGINAL))
@pytest.mark.parametrize('data', ['cifar10', 'cifar100', 'tiny-imagenet'])
def test_config_op_equals_the_originals_pil_op(data, op):
    cfg = load(f'sl_vit/vit_1xb128-cutmix_{data}.py')
    aug = next(t for t in cfg.train_dataloader.dataset.pipeline
               if t['type'] == 'AutoAugment')
    # to_rgb: the preprocessor flips BGR arrays (LoadImageFromFile's)
    bgr = cfg.data_preprocessor.get('to_rgb', False)
    size = 64 if data == 'tiny-imagenet' else 32
    rgb_images = np.random.RandomState(0).randint(0, 256, (3, size, size, 3)
                                                  ).astype(np.uint8)
    policy = IMAGENET_POLICY if data == 'tiny-imagenet' else CIFAR10_POLICY
    found = 0
    for ours_pair, (_, op1, m1, _, op2, m2) in zip(aug.policies, policy):
        for ours, name, index in zip(ours_pair, (op1, op2), (m1, m2)):
            if name != op:
                continue
            found += 1
            # our sign draw forced to + (p 0) and - (p 1); Rotate's is the
            # config's own (never negated, as the original)
            for sign in [1] if op == 'rotate' else [1, -1]:
                t = TRANSFORMS.build(merge_hparams(dict(ours, prob=1.0, **(
                    {} if op == 'rotate' else dict(
                        random_negative_prob=float(sign < 0)))), aug.hparams))
                for rgb in rgb_images:
                    got = t(dict(img=(rgb[..., ::-1] if bgr else rgb).copy()))
                    got = got['img'][..., ::-1] if bgr else got['img']
                    want = ORIGINAL[op](Image.fromarray(rgb),
                                        RANGES[op][index], sign)
                    # PIL's integer arithmetic on both sides: equal exactly
                    np.testing.assert_array_equal(got, np.asarray(want),
                                                  f'{data} {ours} {sign}')
    assert found
