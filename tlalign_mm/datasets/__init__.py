"""Datasets that mmpretrain lacks, registered in its ``DATASETS``.

- :class:`Digits`: scikit-learn's bundled handwritten digits (the main job).
- :class:`TinyImageNet`: the class-folder Tiny-ImageNet (SPT/LSA recipes).
- :class:`LocalCIFAR10`, :class:`LocalCIFAR100`: mmpretrain's CIFAR from
  local files, never downloaded (transfer, SPT/LSA recipes).
- :class:`ImageNetA`, :class:`ImageNetR`, :class:`ImageNetV2`,
  :class:`ImageNetC`: robustness test sets in ImageNet-1k's label space.
- :class:`MultiPassSampler`: the SPT/LSA code's epoch of several shuffled
  passes (its ``RASampler`` with ``repetitions=1``).
- :class:`ZhongRandomErasing`: random erasing as the SPT/LSA code does it
  (uniform aspect ratio, a fill given in normalised units).
- :class:`PILRotate`, :class:`PILColorTransform`, :class:`PILContrast`:
  mmpretrain's AutoAugment ops computed with PIL as the SPT/LSA code does
  (grey fill, PIL's grey of an RGB or BGR array).
- :func:`check_config_datasets`: the layouts ADE20K, COCO, Flowers-102 and
  Stanford Cars (OpenMMLab's own dataset classes) expect, checked before a
  run (``tools/train.py``, ``tools/test.py``).
"""
from .cifar import LocalCIFAR10, LocalCIFAR100
from .digits import Digits
from .imagenet_robustness import (
    CORRUPTIONS,
    ImageNetA,
    ImageNetC,
    ImageNetR,
    ImageNetV2,
    imagenet_synsets,
    subset_synsets,
)
from .layouts import check_config_datasets
from .multi_pass_sampler import MultiPassSampler, multi_pass_indices
from .pil_augment import PILColorTransform, PILContrast, PILRotate
from .random_erasing import ZhongRandomErasing
from .tiny_imagenet import TinyImageNet

__all__ = [
    'CORRUPTIONS', 'Digits', 'ImageNetA', 'ImageNetC', 'ImageNetR',
    'ImageNetV2', 'LocalCIFAR10', 'LocalCIFAR100', 'MultiPassSampler',
    'PILColorTransform', 'PILContrast', 'PILRotate',
    'TinyImageNet', 'check_config_datasets', 'imagenet_synsets',
    'multi_pass_indices', 'subset_synsets', 'ZhongRandomErasing'
]
