"""Tiny synthetic datasets in the real on-disk layouts, for the tests and
``tools/smoke.py``.

Every writer produces the files the official release has, in the format the
OpenMMLab dataset classes read (JPEG images, PNG label maps, COCO JSON with
polygons, CIFAR "python version" pickles, the Flowers/Cars ``.mat`` files
written with scipy and read by mmpretrain through mat4py). Pixel content is
random; labels are consistent with it where it matters (segmentation maps,
boxes and polygons inside the image).
"""
import json
import os
import os.path as osp
import pickle
from typing import List, Sequence, Tuple

import numpy as np
from PIL import Image


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _save_jpg(path: str, hw: Tuple[int, int], rng) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    img = rng.integers(0, 256, size=(*hw, 3), dtype=np.uint8)
    Image.fromarray(img).save(path, quality=90)


def write_ade20k(root: str, n_train: int = 4, n_val: int = 1,
                 hw: Tuple[int, int] = (64, 80), seed: int = 0) -> str:
    """``images/{training,validation}/*.jpg`` and
    ``annotations/{training,validation}/*.png`` (uint8, 0 = other/ignored,
    1-150 the classes; mmseg's ``reduce_zero_label=True`` maps them to
    255 and 0-149)."""
    rng = _rng(seed)
    for split, n, tag in (('training', n_train, 'train'),
                          ('validation', n_val, 'val')):
        for i in range(n):
            name = f'ADE_{tag}_{i + 1:08d}'
            _save_jpg(osp.join(root, 'images', split, name + '.jpg'), hw,
                      rng)
            label = np.zeros(hw, dtype=np.uint8)
            h, w = hw
            for k in range(4):  # a few class blocks, some background
                y0, x0 = rng.integers(0, h // 2), rng.integers(0, w // 2)
                label[y0:y0 + h // 2, x0:x0 + w // 2] = rng.integers(1, 151)
            path = osp.join(root, 'annotations', split, name + '.png')
            os.makedirs(osp.dirname(path), exist_ok=True)
            Image.fromarray(label).save(path)
    return root


def coco_classes() -> Sequence[str]:
    from mmdet.datasets import CocoDataset
    return CocoDataset.METAINFO['classes']


def write_coco(root: str, n_train: int = 4, n_val: int = 1,
               hw: Tuple[int, int] = (64, 96), seed: int = 0) -> str:
    """``{train,val}2017/*.jpg`` and ``annotations/instances_{train,
    val}2017.json`` with the 80 COCO categories (official ids), two
    objects per image with polygon masks."""
    rng = _rng(seed)
    official_ids = [i for i in range(1, 91) if i not in (
        12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]  # the 80 of 1-90 in use
    categories = [
        dict(id=i, name=name, supercategory='thing')
        for i, name in zip(official_ids, coco_classes())
    ]
    h, w = hw
    ann_id = 1
    for split, n, offset in (('train2017', n_train, 1),
                             ('val2017', n_val, 1000)):
        images, annotations = [], []
        for i in range(n):
            image_id = offset + i
            name = f'{image_id:012d}.jpg'
            _save_jpg(osp.join(root, split, name), hw, rng)
            images.append(dict(id=image_id, file_name=name, height=h,
                               width=w))
            for k in range(2):
                bw, bh = int(rng.integers(16, w // 2)), int(
                    rng.integers(16, h // 2))
                x, y = int(rng.integers(0, w - bw)), int(
                    rng.integers(0, h - bh))
                # a diamond inside the box: a real polygon, not the box
                poly = [x + bw / 2, y, x + bw, y + bh / 2, x + bw / 2,
                        y + bh, x, y + bh / 2]
                annotations.append(
                    dict(id=ann_id, image_id=image_id,
                         category_id=official_ids[int(rng.integers(0, 80))],
                         bbox=[x, y, bw, bh], area=bw * bh / 2.0,
                         iscrowd=0, segmentation=[poly]))
                ann_id += 1
        path = osp.join(root, 'annotations', f'instances_{split}.json')
        os.makedirs(osp.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            json.dump(dict(images=images, annotations=annotations,
                           categories=categories), f)
    return root


def _dump(path: str, obj) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        pickle.dump(obj, f, protocol=2)


def _cifar_batch(n: int, classes: int, key: str, rng) -> dict:
    return {
        'data': rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
        key: [int(x) for x in rng.integers(0, classes, size=n)],
        'filenames': [f'img_{i}.png' for i in range(n)],
    }


def write_cifar(root: str, kind: str = 'cifar10', per_file: int = 2,
                seed: int = 0) -> str:
    """The official file set: ``cifar-10-batches-py/data_batch_1..5,
    test_batch, batches.meta`` or ``cifar-100-python/train, test, meta``
    (their md5 sums are of course not the official ones)."""
    rng = _rng(seed)
    if kind == 'cifar10':
        folder = osp.join(root, 'cifar-10-batches-py')
        for name in [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']:
            _dump(osp.join(folder, name),
                  _cifar_batch(per_file, 10, 'labels', rng))
        _dump(osp.join(folder, 'batches.meta'),
              {'label_names': [f'class{i}' for i in range(10)]})
    elif kind == 'cifar100':
        folder = osp.join(root, 'cifar-100-python')
        _dump(osp.join(folder, 'train'),
              _cifar_batch(per_file * 5, 100, 'fine_labels', rng))
        _dump(osp.join(folder, 'test'),
              _cifar_batch(per_file, 100, 'fine_labels', rng))
        _dump(osp.join(folder, 'meta'),
              {'fine_label_names': [f'class{i}' for i in range(100)]})
    else:
        raise ValueError(kind)
    return root


def write_flowers102(root: str, n_train: int = 2, n_val: int = 2,
                     n_test: int = 2, hw: Tuple[int, int] = (48, 40),
                     seed: int = 0) -> str:
    """``jpg/image_%05d.jpg``, ``imagelabels.mat`` (``labels``, 1x N,
    1-102) and ``setid.mat`` (``trnid``, ``valid``, ``tstid``, 1-based)."""
    from scipy.io import savemat
    rng = _rng(seed)
    n = n_train + n_val + n_test
    for i in range(1, n + 1):
        _save_jpg(osp.join(root, 'jpg', f'image_{i:05d}.jpg'), hw, rng)
    labels = rng.integers(1, 103, size=(1, n)).astype(np.uint8)
    savemat(osp.join(root, 'imagelabels.mat'), {'labels': labels})
    ids = np.arange(1, n + 1, dtype=np.uint16)
    savemat(
        osp.join(root, 'setid.mat'), {
            'trnid': ids[None, :n_train],
            'valid': ids[None, n_train:n_train + n_val],
            'tstid': ids[None, n_train + n_val:],
        })
    return root


def write_stanford_cars(root: str, n_train: int = 4, n_test: int = 2,
                        hw: Tuple[int, int] = (40, 56),
                        seed: int = 0) -> str:
    """The "car_ims + cars_annos.mat" variant: ``car_ims/%06d.jpg`` and
    ``cars_annos.mat`` whose ``annotations`` struct array has
    ``relative_im_path``, ``bbox_x1..y2``, ``class`` (1-196) and ``test``
    (0/1), plus ``class_names``."""
    from scipy.io import savemat
    rng = _rng(seed)
    n = n_train + n_test
    annotations = np.zeros((1, n), dtype=[(f, 'O') for f in (
        'relative_im_path', 'bbox_x1', 'bbox_y1', 'bbox_x2', 'bbox_y2',
        'class', 'test')])
    for i in range(n):
        rel = f'car_ims/{i + 1:06d}.jpg'
        _save_jpg(osp.join(root, rel), hw, rng)
        values = (1, 1, hw[1] - 1, hw[0] - 1, int(rng.integers(1, 197)),
                  int(i >= n_train))
        annotations[0, i] = (rel, *(np.array([[v]], np.uint8)
                                    for v in values))
    names = np.array([[f'car {i}' for i in range(196)]], dtype=object)
    savemat(osp.join(root, 'cars_annos.mat'),
            {'annotations': annotations, 'class_names': names})
    return root


def write_imagenet(root: str, n_train: int = 4, n_val: int = 2,
                   hw: Tuple[int, int] = (40, 48), seed: int = 0) -> str:
    """mmpretrain ``ImageNet``'s annotation-file layout:
    ``{train,val}/*.JPEG`` listed with their class index (0-999) in
    ``meta/{train,val}.txt``."""
    rng = _rng(seed)
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    for split, n in (('train', n_train), ('val', n_val)):
        lines = []
        for i in range(n):
            _save_jpg(osp.join(root, split, f'{i:08d}.JPEG'), hw, rng)
            lines.append(f'{i:08d}.JPEG {int(rng.integers(0, 1000))}\n')
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.writelines(lines)
    return root


def write_tiny_imagenet(root: str, wnids: Sequence[str] = ('n01443537',
                                                           'n01629819'),
                        seed: int = 0) -> str:
    """``train/<wnid>/images/*.JPEG`` (2 per class) and
    ``val/<wnid>/*.JPEG`` (1 per class), 64x64 as the release."""
    write_class_folders(osp.join(root, 'train'),
                        [f'{w}/images' for w in wnids], 2, (64, 64), '.JPEG',
                        seed)
    write_class_folders(osp.join(root, 'val'), wnids, 1, (64, 64), '.JPEG',
                        seed + 1)
    return root


def write_class_folders(root: str, folders: Sequence[str], per_class: int = 1,
                        hw: Tuple[int, int] = (40, 48), ext: str = '.jpg',
                        seed: int = 0) -> List[str]:
    """``root/<folder>/<i>.jpg`` for each folder (ImageNet-A/R/V2)."""
    rng = _rng(seed)
    paths = []
    for folder in folders:
        for i in range(per_class):
            path = osp.join(root, folder, f'{i:04d}{ext}')
            _save_jpg(path, hw, rng)
            paths.append(path)
    return paths


def write_imagenet_c(root: str, corruptions: Sequence[str],
                     severities: Sequence[int], wnids: Sequence[str],
                     hw: Tuple[int, int] = (32, 32), seed: int = 0) -> int:
    """``root/<corruption>/<severity>/<wnid>/0.JPEG``; returns the count."""
    count = 0
    for c in corruptions:
        for s in severities:
            write_class_folders(
                osp.join(root, c, str(s)), wnids, 1, hw, '.JPEG',
                seed + count)
            count += len(wnids)
    return count
