"""Datasets that mmpretrain lacks, registered in its ``DATASETS``.

- :class:`Digits`: scikit-learn's bundled handwritten digits (the main job).
- :class:`TinyImageNet`: the class-folder Tiny-ImageNet (SPT/LSA recipes).
- :class:`LocalCIFAR10`, :class:`LocalCIFAR100`: mmpretrain's CIFAR from
  local files, never downloaded (transfer, SPT/LSA recipes).
- :class:`ImageNetA`, :class:`ImageNetR`, :class:`ImageNetV2`,
  :class:`ImageNetC`: robustness test sets in ImageNet-1k's label space.
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
from .tiny_imagenet import TinyImageNet

__all__ = [
    'CORRUPTIONS', 'Digits', 'ImageNetA', 'ImageNetC', 'ImageNetR',
    'ImageNetV2', 'LocalCIFAR10', 'LocalCIFAR100', 'TinyImageNet',
    'imagenet_synsets', 'subset_synsets'
]
