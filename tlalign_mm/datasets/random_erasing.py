"""Random erasing as the SPT/LSA code does it (Zhong et al.'s original).

aanna0701/SPT_LSA_ViT (54bd796) ``utils/random_erasing.py:8-46`` (Zhong
et al.'s ``RandomErasing``), called as ``RandomErasing(probability=--re,
sh=--re_sh, r1=--re_r1, mean=<dataset mean>)`` *after* ``Normalize``
(``main.py:202-214``; ``--re 0.25``, ``--re_sh 0.4``, ``--re_r1 0.3`` at
``main.py:100-104``). Unlike mmpretrain's ``RandomErasing``, the aspect
ratio is uniform in ``[r1, 1/r1]`` (not log-uniform); it tries 100 times
for a box strictly inside the image, else erases nothing (mmpretrain clips
one box); and the fill is the dataset-mean numbers (0.4914, ...) written
into the *normalised* tensor, i.e. pixel ``mean + std * 0.4914`` here,
where the data preprocessor normalises later (so the image leaves as
float32, always, for one dtype per batch). The draws are Python's
``random`` calls in the original's order: a run seeded like it erases the
same boxes.
"""
import math
import random
from typing import Sequence

import numpy as np
from mmcv.transforms import BaseTransform
from mmpretrain.registry import TRANSFORMS

__all__ = ['ZhongRandomErasing']


@TRANSFORMS.register_module()
class ZhongRandomErasing(BaseTransform):
    """Erase one random box of an ``(H, W, C)`` ``img`` (made float32), as
    Zhong et al.'s ``RandomErasing`` in the SPT/LSA code.

    Args:
        fill (Sequence[float]): per channel, in the image's channel order
            and pixel units (a one-channel image takes ``fill[1]``, as the
            original).
        erase_prob (float): ``probability``. Defaults to 0.5.
        min_area_ratio, max_area_ratio (float): box / image area bounds
            (``sl``, ``sh``). Default to 0.02, 0.4.
        min_aspect (float): h / w is uniform in ``[min_aspect, 1 /
            min_aspect]`` (``r1``). Defaults to 0.3.
    """

    def __init__(self, fill: Sequence[float], erase_prob: float = 0.5,
                 min_area_ratio: float = 0.02, max_area_ratio: float = 0.4,
                 min_aspect: float = 0.3):
        for ok, need, got in (
                (0 <= erase_prob <= 1, '0 <= erase_prob <= 1', erase_prob),
                (0 < min_area_ratio <= max_area_ratio <= 1,
                 '0 < min_area_ratio <= max_area_ratio <= 1',
                 (min_area_ratio, max_area_ratio)),
                (0 < min_aspect <= 1, '0 < min_aspect <= 1 (the range is '
                 '[min_aspect, 1/min_aspect])', min_aspect),
                (len(fill) == 3, 'a fill value per channel of an RGB/BGR '
                 'image', fill)):
            if not ok:
                raise ValueError(f'ZhongRandomErasing needs {need}, got '
                                 f'{got}.')
        self.fill = tuple(float(v) for v in fill)
        self.erase_prob = erase_prob
        self.min_area_ratio = min_area_ratio
        self.max_area_ratio = max_area_ratio
        self.min_aspect = min_aspect

    def transform(self, results: dict) -> dict:
        img = results['img'].astype(np.float32)
        results['img'] = img
        if random.uniform(0, 1) > self.erase_prob:
            return results
        height, width = img.shape[:2]
        for _ in range(100):
            area = height * width
            target_area = random.uniform(self.min_area_ratio,
                                         self.max_area_ratio) * area
            aspect_ratio = random.uniform(self.min_aspect,
                                          1 / self.min_aspect)
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if w < width and h < height:
                top = random.randint(0, height - h)
                left = random.randint(0, width - w)
                img[top:top + h, left:left + w] = self.fill if (
                    img.ndim == 3 and img.shape[2] == 3) else self.fill[1]
                return results
        return results

    def __repr__(self):
        return (f'{type(self).__name__}(erase_prob={self.erase_prob}, '
                f'min_area_ratio={self.min_area_ratio}, max_area_ratio='
                f'{self.max_area_ratio}, min_aspect={self.min_aspect}, '
                f'fill={self.fill})')
