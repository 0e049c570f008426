"""The SPT/LSA configs' AutoAugment Rotate, Color and Contrast, and the
transfer CIFAR configs' RandAugment Color and Contrast, as the Runner builds
them (the config's training dataset, on a synthetic copy of its files),
equal the original's PIL ops on the images the dataset holds: mmpretrain's
CIFAR arrays (RGB), Tiny-ImageNet's JPEGs as its LoadImageFromFile decodes
them (BGR)."""
import copy
import glob
import os.path as osp
import pickle
import random
from itertools import product
from unittest import mock

import numpy as np
import pytest
from mmcv.transforms import LoadImageFromFile
from mmengine.registry import DATASETS, DefaultScope
from mmpretrain.datasets.transforms import AutoAugment, RandAugment
from mmpretrain.registry import TRANSFORMS
from PIL import Image, ImageEnhance
from timm.data import auto_augment as timm_aa

import tlalign_mm  # noqa: F401
from tests.test_paper_configs import load
from tests.test_sl_vit_configs import (
    CIFAR10_POLICY,
    IMAGENET_POLICY,
    OPS,
    RANGES,
)
from tlalign_mm.datasets.synthetic import write_cifar, write_tiny_imagenet
from tlalign_mm.testing.configs import ROOT

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


def built_dataset(data: str, root: str, config: str = None):
    """The training dataset of ``config`` (default the ViT config on
    ``data``), built as the Runner builds it, on files written under
    ``root``; and each sample's RGB image as the original reads it (the
    CIFAR files' R, G, B planes; PIL's ``Image.open(f).convert('RGB')``,
    ``utils/dataloader.py:77-82``)."""
    cfg = load(config or f'sl_vit/vit_1xb128-cutmix_{data}.py')
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


def arrays_at(dataset, aug, rgb_images) -> list:
    """``(array, rgb, bgr)`` of the first three samples: the array the
    transforms before ``aug`` load (``bgr``: its channels are the RGB
    image's reversed). Those that load nothing (crops, flips) keep the
    order: each, at the same draws, commutes with reversing the
    channels."""
    steps = list(dataset.pipeline.transforms)
    before = steps[:steps.index(aug)]
    loads = [t for t in before if isinstance(t, LoadImageFromFile)]
    arrays = []
    for i, rgb in enumerate(rgb_images[:3]):
        results = dataset.get_data_info(i)
        for t in loads:
            results = t(results)
        array = results['img']
        # the dataset's channel order, from its arrays
        bgr = not np.array_equal(array, rgb)
        assert np.array_equal(array, rgb[..., ::-1] if bgr else rgb)
        arrays.append((array, rgb, bgr))
        for t in before:
            if t in loads:
                continue
            outs = []
            for img in (array, np.ascontiguousarray(array[..., ::-1])):
                np.random.seed(i)
                outs.append(t(dict(img=img.copy()))['img'])
            assert np.array_equal(outs[0][..., ::-1], outs[1]), t
    return arrays


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
    aug = next(t for t in dataset.pipeline.transforms
               if isinstance(t, AutoAugment))
    arrays = arrays_at(dataset, aug, rgb_images)
    assert all(bgr == (data == 'tiny-imagenet') for _, _, bgr in arrays)
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


TRANSFER_CIFAR = sorted(
    osp.relpath(p, osp.join(ROOT, 'configs'))
    for p in glob.glob(osp.join(ROOT, 'configs/transfer/*_cifar*.py')))


def randaugment(dataset_or_pipeline):
    return next(t for t in dataset_or_pipeline
                if isinstance(t, RandAugment) or (
                    isinstance(t, dict) and t['type'] == 'RandAugment'))


@pytest.mark.parametrize('config', TRANSFER_CIFAR)
def test_transfer_cifar_colour_ops_equal_timms(config, tmp_path):
    """DeiT's transfer recipe runs timm's RandAugment
    ``rand-m9-mstd0.5-inc1`` on CIFAR's RGB PIL images (facebookresearch/
    deit ``datasets.py``: torchvision's ``CIFAR100`` through timm's
    ``create_transform(auto_augment=args.aa)``): its ``ColorIncreasing``
    and ``ContrastIncreasing`` are
    ``ImageEnhance.Color/Contrast(img).enhance(factor)`` at ``factor =
    max(0.1, 1 +- level / 10 * 0.9)`` (timm 1.0.31
    ``data/auto_augment.py:167-172, 218-223``). The op the built
    RandAugment holds in each one's place (mmpretrain's policies are
    timm's ``_RAND_INCREASING_TRANSFORMS`` in order), at the same level and
    sign, on the arrays the dataset hands it (RGB), is within one grey
    level of timm's on the RGB image. mmpretrain's ColorTransform and
    Contrast (mmcv's BGR grey weights) were up to 43 and 27 levels apart
    on these images (15 on average)."""
    data = 'cifar100' if config.endswith('cifar100.py') else 'cifar10'
    dataset, rgb_images = built_dataset(data, str(tmp_path), config)
    aug = randaugment(dataset.pipeline.transforms)
    arrays = arrays_at(dataset, aug, rgb_images)
    assert not any(bgr for _, _, bgr in arrays)
    names = timm_aa._RAND_INCREASING_TRANSFORMS
    assert len(aug.transforms) == len(names)
    found = 0
    for built, name in zip(aug.transforms, names):
        if name not in ('ColorIncreasing', 'ContrastIncreasing'):
            continue
        found += 1
        # the config's level, the top one (factor 0.1), one between
        for level, sign in product((9, 10, 4.5), (1, -1)):
            t = copy.deepcopy(built)
            t.prob, t.random_negative_prob = 1.0, float(sign < 0)
            t.magnitude_level, t.magnitude_std = level, 0
            # timm's _randomly_negate negates where random.random() > 0.5
            with mock.patch.object(random, 'random',
                                   return_value=float(sign < 0)):
                factor, = timm_aa.LEVEL_TO_ARG[name](level, None)
            for array, rgb, _ in arrays:
                got = t(dict(img=array.copy()))['img']
                want = np.asarray(timm_aa.NAME_TO_OP[name](
                    Image.fromarray(rgb), factor))
                diff = np.abs(got.astype(int) - want).max()
                assert diff <= 1, \
                    f'{config} {built} level {level} sign {sign}: {diff}'
    assert found == 2


def _np_state():
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return name, keys.tolist(), pos, has_gauss, gauss


@pytest.mark.parametrize('config', TRANSFER_CIFAR)
def test_transfer_cifar_randaugment_is_timm_increasing_but_its_grey(config):
    """Every other op, argument and draw is mmpretrain's 'timm_increasing'
    RandAugment at the config's settings: op for op the same class and
    attributes, but Color and Contrast, which are their PIL subclasses
    with ``channel_order='rgb'`` (from the hparams); the same
    ``np.random`` draws."""
    given = randaugment(load(config).train_dataloader.dataset.pipeline)
    ours = TRANSFORMS.build(copy.deepcopy(given))
    stock = TRANSFORMS.build(dict(
        copy.deepcopy(given), policies='timm_increasing',
        hparams={k: v for k, v in given['hparams'].items()
                 if k != 'channel_order'}))
    assert len(ours.transforms) == len(stock.transforms)
    pil = []
    for a, b in zip(ours.transforms, stock.transforms, strict=True):
        held = dict(vars(a))
        if type(a) is not type(b):
            assert isinstance(a, type(b)) and \
                type(a).__name__ == f'PIL{type(b).__name__}', (a, b)
            assert held.pop('channel_order') == 'rgb'
            pil.append(type(b).__name__)
        assert held == vars(b), type(a)
    assert pil == ['ColorTransform', 'Contrast']
    img = np.random.RandomState(0).randint(0, 256, (24, 24, 3), np.uint8)
    for seed in range(40):
        np.random.seed(seed)
        ours(dict(img=img.copy()))
        after = _np_state()
        np.random.seed(seed)
        stock(dict(img=img.copy()))
        assert _np_state() == after, seed
