"""scikit-learn's handwritten digits as an mmpretrain dataset: 1,797 8x8
grey images of 0-9 that ship inside scikit-learn, so the demo trains on real
data with no download."""
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple, Union

import mmcv
import numpy as np
import torch
import torch.nn.functional as F
from mmpretrain.datasets import BaseDataset
from mmpretrain.datasets.transforms import PackInputs, RandomCrop
from mmpretrain.registry import DATASETS
from mmpretrain.structures import DataSample


@DATASETS.register_module()
class Digits(BaseDataset):
    """The UCI handwritten digits bundled with scikit-learn: 8x8, 17 grey
    levels, scaled to ``uint8`` and repeated to 3 channels. ``split='train'``
    and ``'test'`` are a stratified, seeded hold-out: disjoint, together
    the whole dataset.

    Args:
        split (str): ``'train'`` or ``'test'``.
        test_ratio (float): share held out. Defaults to 0.2.
        split_seed (int): seed of the split. Defaults to 0.
        scale (int | tuple[int, int], optional): ``(w, h)`` (or a square's
            side) to upsample every image to once, when the data list is
            loaded: the bytes ``dict(type='Resize', scale=scale,
            interpolation='bilinear')`` would give in every epoch. Defaults
            to None (8x8).
        canvas (int | tuple[int, int], optional): ``(w, h)`` (or a square's
            side) of a blank (0) canvas the digit, after ``scale``, is
            pasted on once at load: a small object in a larger frame, where
            a CutMix box's area share is far from the share of the digit it
            holds. At least the digit's size. Defaults to None (no canvas).
        placement (str): where on the canvas: ``'centre'`` (the middle,
            rounded up and left), or ``'random'``: a place drawn once per
            image and fixed, as translated-MNIST benchmarks place their
            digits, the same in every split, process and epoch (the draws
            come from ``placement_seed`` in the order of scikit-learn's
            images, not from ``np.random``). Defaults to ``'centre'``.
        max_shift (int, optional): with ``'random'``, the most the digit
            moves from the centre along each axis (clipped to the canvas).
            Defaults to None: anywhere on the canvas.
        placement_seed (int): seed of the ``'random'`` places. Defaults
            to 0.
        pipeline, **kwargs: as :class:`mmpretrain.datasets.BaseDataset`.

    Each data info holds the image (``img``, ``(h, w, 3)`` ``uint8``), its
    label (``gt_label``) and, with a canvas, where the digit is on it
    (``digit_box``, ``(x1, y1, x2, y2)`` in pixels, ``x2``/``y2``
    exclusive).

    A batch (:meth:`__getitems__`, which torch's ``DataLoader`` calls) is
    made at once from one image tensor when the pipeline is ``RandomCrop``
    (constant padding) then ``PackInputs``, or ``PackInputs`` alone: the
    same samples and random draws as the per-sample pipeline, faster.
    """

    METAINFO = {'classes': tuple(str(i) for i in range(10))}

    def __init__(self, split: str = 'train', test_ratio: float = 0.2,
                 split_seed: int = 0,
                 scale: Optional[Union[int, Sequence[int]]] = None,
                 canvas: Optional[Union[int, Sequence[int]]] = None,
                 placement: str = 'centre', max_shift: Optional[int] = None,
                 placement_seed: int = 0, pipeline=(), **kwargs):
        if split not in ('train', 'test'):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        scale = _size(scale, 'scale')
        canvas = _size(canvas, 'canvas')
        digit = scale or (8, 8)
        if canvas is not None and (canvas[0] < digit[0] or
                                   canvas[1] < digit[1]):
            raise ValueError(
                f'canvas {canvas} (w, h) is smaller than the digit '
                f'{digit}: give a canvas at least the size of `scale` '
                '(8x8 without one).')
        if placement not in ('centre', 'random'):
            raise ValueError("placement must be 'centre' or 'random', got "
                             f'{placement!r}.')
        if (placement != 'centre' or max_shift is not None) and \
                canvas is None:
            raise ValueError(
                f'placement={placement!r}, max_shift={max_shift!r} place '
                'the digit on a canvas: give `canvas` too.')
        if max_shift is not None and (not isinstance(max_shift, int) or
                                      max_shift < 0):
            raise ValueError('max_shift must be a non-negative int or None, '
                             f'got {max_shift!r}.')
        self.split = split
        self.test_ratio = test_ratio
        self.split_seed = split_seed
        self.scale = scale
        self.canvas = canvas
        self.placement = placement
        self.max_shift = max_shift
        self.placement_seed = placement_seed
        super().__init__(
            ann_file='', pipeline=pipeline, test_mode=split == 'test',
            **kwargs)

    def load_data_list(self):
        from sklearn.model_selection import train_test_split
        images, targets = _digits()
        index = np.arange(len(images))
        train, test = train_test_split(
            index, test_size=self.test_ratio, random_state=self.split_seed,
            stratify=targets)
        chosen = np.sort(train if self.split == 'train' else test)
        if self.canvas is not None:
            corners = self._corners(len(images))
        data_list = []
        for i in chosen:
            img = np.repeat(images[i][..., None], 3, axis=2)
            if self.scale is not None:
                img = mmcv.imresize(img, self.scale, interpolation='bilinear')
            info = dict(img=img, gt_label=int(targets[i]))
            if self.canvas is not None:
                (w, h), (x, y) = self.canvas, corners[i].tolist()
                info['img'] = np.zeros((h, w, 3), np.uint8)
                info['img'][y:y + img.shape[0], x:x + img.shape[1]] = img
                info['digit_box'] = (x, y, x + img.shape[1],
                                     y + img.shape[0])
            data_list.append(info)
        return data_list

    def _corners(self, num: int) -> np.ndarray:
        """``(num, 2)`` top-left corners ``(x, y)`` of the digit on the
        canvas, one per image of scikit-learn's order (so an image's place
        does not depend on the split)."""
        room = np.subtract(self.canvas, self.scale or (8, 8))  # (w, h)
        centre = room // 2
        if self.placement == 'centre':
            return np.broadcast_to(centre, (num, 2))
        low, high = np.zeros(2, np.int64), room
        if self.max_shift is not None:
            low = np.maximum(low, centre - self.max_shift)
            high = np.minimum(high, centre + self.max_shift)
        rng = np.random.default_rng(self.placement_seed)
        return rng.integers(low, high + 1, size=(num, 2))

    def __getitems__(self, indices: Sequence[int]) -> List[dict]:
        """``[self[i] for i in indices]`` (the same bytes, data samples and
        ``np.random`` draws), at once when the pipeline allows."""
        steps = self._batch_steps()
        if steps is None:
            return [self[i] for i in indices]
        crop, pack = steps
        if not self._fully_initialized:
            self.full_init()
        if self._images is None:  # once, from the data list
            infos = [self.get_data_info(i) for i in range(len(self))]
            images = torch.from_numpy(np.stack([i['img'] for i in infos]))
            self._images = images.permute(0, 3, 1, 2).contiguous()
            self._labels = torch.tensor([int(i['gt_label']) for i in infos])
        index = torch.as_tensor(indices, dtype=torch.long)
        index = torch.where(index < 0, index + len(self), index)
        images = self._images[index]
        meta = dict(sample_idx=index.tolist())
        if crop is not None:
            images = _random_crop(images, crop)
            B, C, H, W = images.shape
            meta['img_shape'] = [(H, W, C)] * B
        keys = [k for k in pack.meta_keys if k in meta]
        samples = []
        for i, label in enumerate(self._labels[index].unsqueeze(1)):
            sample = DataSample().set_gt_label(label)
            for key in keys:  # as PackInputs sets them
                sample.set_field(meta[key][i], key, field_type='metainfo')
            samples.append(dict(inputs=images[i], data_samples=sample))
        return samples

    _images: Optional[torch.Tensor] = None

    def _batch_steps(self):
        """``(crop, pack)`` when the pipeline is ``[RandomCrop, PackInputs]``
        or ``[PackInputs]`` with options :meth:`__getitems__` follows (crop
        None without one), else None."""
        transforms = list(self.pipeline.transforms)
        if not transforms or type(transforms[-1]) is not PackInputs:
            return None
        pack = transforms.pop()
        if pack.input_key != 'img' or pack.algorithm_keys:
            return None
        if not transforms:
            return None, pack
        crop = transforms.pop()
        if transforms or type(crop) is not RandomCrop or \
                crop.pad_if_needed or \
                not isinstance(crop.padding, (int, type(None))) or \
                not isinstance(crop.pad_val, (int, float)):
            return None
        return crop, pack


def _size(value, name: str) -> Optional[Tuple[int, int]]:
    """``(w, h)`` from a square's side or a pair, checked; None stays."""
    if value is None:
        return None
    if isinstance(value, int):
        value = (value, value)
    value = tuple(value)
    if len(value) != 2 or not all(isinstance(v, int) and v >= 1
                                  for v in value):
        raise ValueError(f'{name} must be a positive int or (w, h), got '
                         f'{value!r}.')
    return value


@lru_cache(maxsize=1)
def _digits() -> Tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as read-only ``uint8`` images ``(N, 8, 8)``
    and labels ``(N,)``, once per process (``load_digits`` parses a CSV)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = np.round(digits.images * (255 / 16)).astype(np.uint8)
    targets = digits.target.copy()
    images.flags.writeable = targets.flags.writeable = False
    return images, targets


def _random_crop(images: torch.Tensor, crop: RandomCrop) -> torch.Tensor:
    """mmpretrain's ``RandomCrop`` (integer padding, constant fill) of each
    image of ``(B, C, H, W)``, with its draws: per image ``offset_h`` then
    ``offset_w`` from ``np.random``, none when the padded image is the
    crop's size."""
    if crop.padding:
        images = F.pad(images, (crop.padding, ) * 4, value=crop.pad_val)
    B, C, H, W = images.shape
    if (H, W) == tuple(crop.crop_size):
        return images
    th, tw = min(crop.crop_size[0], H), min(crop.crop_size[1], W)
    offsets = torch.from_numpy(
        np.random.randint(0, (H - th + 1, W - tw + 1), size=(B, 2)))
    windows = images.unfold(2, th, 1).unfold(3, tw, 1)  # (B, C, h, w, th, tw)
    return windows[torch.arange(B), :, offsets[:, 0], offsets[:, 1]]
