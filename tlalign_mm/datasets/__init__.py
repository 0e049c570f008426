"""What mmpretrain lacks for the recipes, registered in its registries:
datasets in their real on-disk formats that never download (Digits,
Tiny-ImageNet, local CIFAR, ImageNet-A/R/V2/C), the SPT/LSA code's sampler,
random erasing and PIL AutoAugment ops, mmpretrain's AutoAugment with its
hparams applied (``HParamsAutoAugment``), and :func:`check_config_datasets`
(the layouts OpenMMLab's own dataset classes expect, checked before a run).
"""
from .auto_augment import HParamsAutoAugment
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
    'CORRUPTIONS', 'Digits', 'HParamsAutoAugment', 'ImageNetA', 'ImageNetC',
    'ImageNetR', 'ImageNetV2', 'LocalCIFAR10', 'LocalCIFAR100',
    'MultiPassSampler', 'PILColorTransform', 'PILContrast', 'PILRotate',
    'TinyImageNet', 'check_config_datasets', 'imagenet_synsets',
    'multi_pass_indices', 'subset_synsets', 'ZhongRandomErasing'
]
