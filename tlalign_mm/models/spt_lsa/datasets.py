"""Offline small datasets for the SL-ViT configs: mmpretrain's CIFAR-10/100
that never download, and Tiny-ImageNet as a class-folder ``CustomDataset``.

A missing dataset fails at build time with an error that names the expected
layout (mmpretrain's own error only names the folder and suggests
``download=True``; these datasets never touch the network).
"""
import os
import os.path as osp

from mmpretrain.datasets import CIFAR10, CIFAR100, CustomDataset
from mmpretrain.registry import DATASETS


def _cifar_layout(dataset) -> str:
    root = dataset.data_prefix['root']
    files = [f for f, _ in dataset.train_list + dataset.test_list]
    files.append(dataset.meta['filename'])
    lines = '\n'.join(f'    {osp.join(root, dataset.base_folder, f)}'
                      for f in files)
    return (f'{type(dataset).__name__} expects the python version of the '
            f'dataset, unpacked from {dataset.filename} '
            f'({dataset.url}) into {root}:\n{lines}\n'
            'Downloading is disabled: fetch and unpack it yourself, or point '
            'data_root at a copy.')


class _OfflineCIFAR:

    def __init__(self, *args, download: bool = False, **kwargs):
        if download:
            raise ValueError(
                f'{type(self).__name__} never downloads (download=False); '
                'unpack the dataset under data_root yourself.')
        super().__init__(*args, download=False, **kwargs)

    def load_data_list(self):
        root = self.data_prefix['root']
        files = [f for f, _ in self.train_list + self.test_list]
        files.append(self.meta['filename'])
        missing = [
            f for f in files
            if not osp.isfile(osp.join(root, self.base_folder, f))
        ]
        if missing:
            raise FileNotFoundError(
                f'{type(self).__name__}: missing {missing} under '
                f'{osp.join(root, self.base_folder)}. ' + _cifar_layout(self))
        return super().load_data_list()


@DATASETS.register_module()
class OfflineCIFAR10(_OfflineCIFAR, CIFAR10):
    """mmpretrain's ``CIFAR10`` with ``download=False`` always and a missing
    dataset reported with its expected layout
    (``{data_root}/cifar-10-batches-py/data_batch_{1..5}, test_batch,
    batches.meta``)."""


@DATASETS.register_module()
class OfflineCIFAR100(_OfflineCIFAR, CIFAR100):
    """mmpretrain's ``CIFAR100`` with ``download=False`` always and a
    missing dataset reported with its expected layout
    (``{data_root}/cifar-100-python/train, test, meta``)."""


@DATASETS.register_module()
class TinyImageNet(CustomDataset):
    """Tiny-ImageNet-200 from class folders (mmpretrain ``CustomDataset``).

    Expected layout (classes are the sorted folder names, the same 200
    WordNet ids in both splits)::

        {data_root}/train/n01443537/images/n01443537_0.JPEG ...
        {data_root}/val/n01443537/val_0.JPEG ...

    The archive's ``val/`` is flat (``val/images/*.JPEG`` with
    ``val/val_annotations.txt``); move each image into its class folder
    first, e.g.::

        cd {data_root}/val && while read f c _; do mkdir -p $c && \\
            mv images/$f $c/; done < val_annotations.txt && rmdir images

    Args:
        data_root (str): the dataset folder.
        split (str): ``'train'`` or ``'val'``.
        **kwargs: as :class:`mmpretrain.datasets.CustomDataset`.
    """

    LAYOUT = ('{cls} expects class folders:\n'
              '    {root}/train/<wnid>/images/*.JPEG  (as unpacked)\n'
              '    {root}/val/<wnid>/*.JPEG           (val/images/ moved into '
              'class folders with val/val_annotations.txt)\n'
              'with the same 200 <wnid> folders in both splits. Downloading '
              'is disabled.')

    def __init__(self, data_root: str = 'data/tiny-imagenet-200',
                 split: str = 'train', **kwargs):
        if split not in ('train', 'val'):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        self.split = split
        kwargs.setdefault('data_prefix', split)
        super().__init__(data_root=data_root, **kwargs)

    def load_data_list(self):
        folder = self.img_prefix
        layout = self.LAYOUT.format(cls=type(self).__name__,
                                    root=self.data_root)
        if not osp.isdir(folder):
            raise FileNotFoundError(f'{folder} does not exist. {layout}')
        entries = sorted(os.listdir(folder))
        if 'val_annotations.txt' in entries or entries == ['images']:
            raise FileNotFoundError(
                f'{folder} has the archive\'s flat validation layout '
                '(images/ + val_annotations.txt), which would read as one '
                f'class. {layout}')
        if not any(osp.isdir(osp.join(folder, e)) for e in entries):
            raise FileNotFoundError(f'{folder} has no class folders. '
                                    f'{layout}')
        return super().load_data_list()
