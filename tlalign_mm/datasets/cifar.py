"""CIFAR-10/100 from local files, never downloaded.

mmpretrain's ``CIFAR10``/``CIFAR100`` read the official "python version"
pickles but download them by default. ``LocalCIFAR10``/``LocalCIFAR100``
read the same on-disk format, never download, and say which files they
expect where when they are missing. The official archives' md5 sums are
checked unless ``verify_md5=False``.
"""
import os.path as osp
import pickle

from mmengine.fileio import get, join_path
from mmpretrain.datasets import CIFAR10, CIFAR100
from mmpretrain.datasets.utils import check_md5
from mmpretrain.registry import DATASETS

__all__ = ['LocalCIFAR10', 'LocalCIFAR100']


class _LocalCIFARMixin:
    """Replace mmpretrain's download-or-fail integrity check."""

    meta: dict
    base_folder: str
    url: str
    train_list: list
    test_list: list

    def __init__(self,
                 data_root: str = '',
                 split: str = 'train',
                 verify_md5: bool = True,
                 download: bool = False,
                 **kwargs):
        if download:
            raise ValueError(
                f'{type(self).__name__} never downloads (download=True was '
                f'given). Download {self.url} yourself and extract it into '
                'data_root.')
        self.verify_md5 = verify_md5
        self._verified = False
        # the next class in the MRO: mmpretrain's CIFAR10 / CIFAR100
        super().__init__(
            data_root=data_root, split=split, download=False, **kwargs)

    def _expected_layout(self, root: str) -> str:
        root = root.rstrip('/') or '/'
        files = [f for f, _ in self.train_list + self.test_list]
        files.append(self.meta['filename'])
        tree = '\n'.join(f'        {f}' for f in files)
        return (f'    {root}/\n      {self.base_folder}/\n{tree}\n'
                f'(the "python version" archive {osp.basename(self.url)} '
                f'from {self.url}, extracted into {root})')

    def _check_integrity(self) -> bool:
        if self._verified:
            return True
        root = self.data_prefix['root']
        needed = self.train_list if self.split == 'train' else self.test_list
        entries = list(needed) + [[self.meta['filename'], self.meta['md5']]]
        paths = [(join_path(root, self.base_folder, f), md5)
                 for f, md5 in entries]
        missing = [p for p, _ in paths if not osp.isfile(p)]
        if missing:
            raise FileNotFoundError(
                f'{type(self).__name__} (split={self.split!r}) is missing '
                f'{len(missing)} file(s): {", ".join(missing)}. Expected '
                f'layout (nothing is downloaded):\n'
                f'{self._expected_layout(root)}')
        if self.verify_md5:
            bad = [p for p, md5 in paths if not check_md5(p, md5)]
            if bad:
                raise RuntimeError(
                    f'{type(self).__name__}: {", ".join(bad)} differ from '
                    f'the official release (md5 of {self.url}). Re-extract '
                    'the archive, or pass verify_md5=False to use these '
                    'files as they are.')
        self._verified = True
        return True

    def _load_meta(self) -> None:
        self._check_integrity()
        path = join_path(self.data_prefix['root'], self.base_folder,
                         self.meta['filename'])
        data = pickle.loads(get(path), encoding='latin1')
        self._metainfo.setdefault('classes', data[self.meta['key']])


@DATASETS.register_module()
class LocalCIFAR10(_LocalCIFARMixin, CIFAR10):
    """mmpretrain's ``CIFAR10`` that never downloads.

    Expected layout (the official "python version")::

        data_root/cifar-10-batches-py/
            data_batch_1 ... data_batch_5, test_batch, batches.meta

    Args:
        data_root (str): the folder holding ``cifar-10-batches-py``.
        split (str): ``'train'`` or ``'test'``.
        verify_md5 (bool): check the files against the official md5 sums.
            Defaults to True.
        download (bool): must be False (kept for config compatibility).
        **kwargs: as :class:`mmpretrain.datasets.CIFAR10`.
    """


@DATASETS.register_module()
class LocalCIFAR100(_LocalCIFARMixin, CIFAR100):
    """mmpretrain's ``CIFAR100`` that never downloads.

    Expected layout (the official "python version")::

        data_root/cifar-100-python/
            train, test, meta

    Args: as :class:`LocalCIFAR10`.
    """
