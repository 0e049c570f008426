"""The SPT/LSA configs' AutoAugment Rotate, Color and Contrast, as the
Runner builds them (the config's training dataset, on a synthetic copy of
its files), equal the original's PIL ops on the images the dataset holds:
mmpretrain's CIFAR arrays (RGB), Tiny-ImageNet's JPEGs as its
LoadImageFromFile decodes them (BGR)."""
import copy
import os.path as osp
import pickle

import numpy as np
import pytest
from mmcv.transforms import LoadImageFromFile
from mmengine.registry import DATASETS, DefaultScope
from mmpretrain.datasets.transforms import AutoAugment
from PIL import Image, ImageEnhance

import tlalign_mm  # noqa: F401
from tests.test_paper_configs import load
from tests.test_sl_vit_configs import (
    CIFAR10_POLICY,
    IMAGENET_POLICY,
    OPS,
    RANGES,
)
from tlalign_mm.datasets.synthetic import write_cifar, write_tiny_imagenet

# aanna0701/SPT_LSA_ViT@54bd796 utils/transforms.py:48-53, 56-58, 71-73,
# verbatim but for random.choice([-1, 1]), passed in as `s` (Rotate has
# none).
ORIGINAL = dict(
    rotate=lambda x, m, s: Image.composite(
        rot := x.convert("RGBA").rotate(m),
        Image.new("RGBA", rot.size, (128,) * 4), rot).convert(x.mode),
    color=lambda x, m, s: ImageEnhance.Color(x).enhance(1 + m * s),
    contrast=lambda x, m, s: ImageEnhance.Contrast(x).enhance(1 + m * s))


CIFAR_FILES = dict(cifar10=[f'cifar-10-batches-py/data_batch_{i}'
                            for i in range(1, 6)],
                   cifar100=['cifar-100-python/train'])


def built_dataset(data: str, root: str):
    """The training dataset of the ViT config on ``data``, built as the
    Runner builds it, on files written under ``root``; and each sample's
    RGB image as the original reads it (the CIFAR files' R, G, B planes;
    PIL's ``Image.open(f).convert('RGB')``, ``utils/dataloader.py:77-82``).
    """
    cfg = load(f'sl_vit/vit_1xb128-cutmix_{data}.py')
    dataset_cfg = copy.deepcopy(cfg.train_dataloader.dataset)
    dataset_cfg.data_root = root
    if data == 'tiny-imagenet':
        write_tiny_imagenet(root)
    else:
        write_cifar(root, data)
        dataset_cfg.verify_md5 = False  # not the official files
        # red, green and blue of different means, so that a grey image
        # weighed in the wrong order is another image (uniform noise in
        # every channel hides it from Contrast, which blends with the mean)
        low, span = np.array([[128], [0], [0]]), np.array([[128], [256], [64]])
        rng = np.random.default_rng(0)
        for name in CIFAR_FILES[data]:
            with open(osp.join(root, name), 'rb') as f:
                batch = pickle.load(f)
            n = len(batch['data'])
            batch['data'] = (low + rng.integers(0, span, (n, 3, 1024))
                             ).reshape(n, 3072).astype(np.uint8)
            with open(osp.join(root, name), 'wb') as f:
                pickle.dump(batch, f, protocol=2)
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        dataset = DATASETS.build(dataset_cfg)
    if data == 'tiny-imagenet':
        rgb = [np.asarray(Image.open(dataset.get_data_info(i)['img_path'])
                          .convert('RGB')) for i in range(len(dataset))]
    else:
        rows = []
        for name in CIFAR_FILES[data]:
            with open(osp.join(root, name), 'rb') as f:
                rows.append(pickle.load(f)['data'])
        rows = np.concatenate(rows)
        rgb = list(rows.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    return dataset, rgb


@pytest.mark.parametrize('op', list(ORIGINAL))
@pytest.mark.parametrize('data', ['cifar10', 'cifar100', 'tiny-imagenet'])
def test_config_op_equals_the_originals_pil_op(data, op, tmp_path):
    """Each op of the built AutoAugment at the original's magnitude, on
    the arrays its dataset hands it (what the transforms before it load),
    within one grey level of the original's PIL op on the RGB image (PIL
    on both sides: equal). Issue 38: mmpretrain's AutoAugment dropped its
    hparams, and on CIFAR Color and Contrast weighed the grey image with
    BGR weights (up to 43 levels apart on these images)."""
    dataset, rgb_images = built_dataset(data, str(tmp_path))
    steps = list(dataset.pipeline.transforms)
    aug = next(t for t in steps if isinstance(t, AutoAugment))
    loads = [t for t in steps[:steps.index(aug)]
             if isinstance(t, LoadImageFromFile)]
    arrays = []
    for i, rgb in enumerate(rgb_images[:3]):
        results = dataset.get_data_info(i)
        for t in loads:
            results = t(results)
        array = results['img']
        # the dataset's channel order, from its arrays
        bgr = not np.array_equal(array, rgb)
        assert np.array_equal(array, rgb[..., ::-1] if bgr else rgb)
        assert bgr == (data == 'tiny-imagenet')
        arrays.append((array, rgb, bgr))
    policy = IMAGENET_POLICY if data == 'tiny-imagenet' else CIFAR10_POLICY
    found = 0
    for sub, (_, op1, m1, _, op2, m2) in zip(aug.transforms, policy,
                                              strict=True):
        for built, name, index in zip(sub.transforms, (op1, op2), (m1, m2),
                                      strict=True):
            if name != op:
                continue
            assert type(built).__name__ == OPS[op][0]
            found += 1
            # the draws forced: applied, with sign + (p 0) and - (p 1);
            # Rotate's is the config's own (never negated, as the original)
            for sign in [1] if op == 'rotate' else [1, -1]:
                t = copy.deepcopy(built)
                t.prob = 1.0
                if op != 'rotate':
                    t.random_negative_prob = float(sign < 0)
                for array, rgb, bgr in arrays:
                    got = t(dict(img=array.copy()))['img']
                    got = got[..., ::-1] if bgr else got
                    want = np.asarray(ORIGINAL[op](
                        Image.fromarray(rgb), RANGES[op][index], sign))
                    diff = np.abs(got.astype(int) - want).max()
                    assert diff <= 1, f'{data} {built} sign {sign}: {diff}'
    assert found
