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
        pipeline, **kwargs: as :class:`mmpretrain.datasets.BaseDataset`.

    A batch (:meth:`__getitems__`, which torch's ``DataLoader`` calls) is
    made at once from one image tensor when the pipeline is ``RandomCrop``
    (constant padding) then ``PackInputs``, or ``PackInputs`` alone: the
    same samples and random draws as the per-sample pipeline, faster.
    """

    METAINFO = {'classes': tuple(str(i) for i in range(10))}

    def __init__(self, split: str = 'train', test_ratio: float = 0.2,
                 split_seed: int = 0,
                 scale: Optional[Union[int, Sequence[int]]] = None,
                 pipeline=(), **kwargs):
        if split not in ('train', 'test'):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        if isinstance(scale, int):
            scale = (scale, scale)
        if scale is not None and (len(scale) != 2 or min(scale) < 1):
            raise ValueError('scale must be a positive int or (w, h), got '
                             f'{scale!r}.')
        self.split = split
        self.test_ratio = test_ratio
        self.split_seed = split_seed
        self.scale = None if scale is None else tuple(scale)
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
        data_list = []
        for i in chosen:
            img = np.repeat(images[i][..., None], 3, axis=2)
            if self.scale is not None:
                img = mmcv.imresize(img, self.scale, interpolation='bilinear')
            data_list.append(dict(img=img, gt_label=int(targets[i])))
        return data_list

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
