"""scikit-learn's handwritten digits as an mmpretrain dataset.

1,797 8x8 grey images of the digits 0-9 that ship inside scikit-learn, so
the demo trains on real data with no download.
"""
from typing import Optional, Sequence, Union

import mmcv
import numpy as np
from mmpretrain.datasets import BaseDataset
from mmpretrain.registry import DATASETS


@DATASETS.register_module()
class Digits(BaseDataset):
    """The UCI handwritten digits bundled with scikit-learn.

    Images are 8x8 with 17 grey levels; they are scaled to ``uint8`` and
    repeated to 3 channels. The split is a stratified, seeded hold-out:
    ``split='train'`` and ``split='test'`` are disjoint and together cover
    the dataset.

    Args:
        split (str): ``'train'`` or ``'test'``.
        test_ratio (float): share of images held out. Defaults to 0.2.
        split_seed (int): seed of the split. Defaults to 0.
        scale (int | tuple[int, int], optional): ``(w, h)`` (or one side of
            a square) to upsample every image to once, when the data list is
            loaded, with ``mmcv.imresize(..., interpolation='bilinear')``:
            the bytes ``dict(type='Resize', scale=scale,
            interpolation='bilinear')`` would give, without resizing each
            sample again in every epoch. Defaults to None (8x8).
        pipeline (list): data transforms.
        **kwargs: as :class:`mmpretrain.datasets.BaseDataset`.
    """

    METAINFO = {'classes': tuple(str(i) for i in range(10))}

    def __init__(self,
                 split: str = 'train',
                 test_ratio: float = 0.2,
                 split_seed: int = 0,
                 scale: Optional[Union[int, Sequence[int]]] = None,
                 pipeline=(),
                 **kwargs):
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
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        digits = load_digits()
        images = np.round(digits.images * (255 / 16)).astype(np.uint8)
        index = np.arange(len(images))
        train, test = train_test_split(
            index, test_size=self.test_ratio, random_state=self.split_seed,
            stratify=digits.target)
        chosen = np.sort(train if self.split == 'train' else test)
        data_list = []
        for i in chosen:
            img = np.repeat(images[i][..., None], 3, axis=2)
            if self.scale is not None:
                img = mmcv.imresize(img, self.scale, interpolation='bilinear')
            data_list.append(dict(img=img, gt_label=int(digits.target[i])))
        return data_list
