"""CIFAR-10/100 from local files, never downloaded.

mmpretrain's ``CIFAR10``/``CIFAR100`` download by default and read the
official "python version" pickles with plain :func:`pickle.loads`, which
runs whatever a crafted file asks for. ``LocalCIFAR10``/``LocalCIFAR100``
read them with :class:`CIFARUnpickler` (only the numpy types the real files
hold), check the official md5 sums unless ``verify_md5=False``, and name
the files they expect where when they are missing.
"""
import io
import os.path as osp
import pickle
from typing import Any

import numpy as np
from mmengine.fileio import get, join_path
from mmpretrain.datasets import CIFAR10, CIFAR100
from mmpretrain.datasets.utils import check_md5
from mmpretrain.registry import DATASETS

__all__ = ['CIFARUnpickler', 'LocalCIFAR10', 'LocalCIFAR100', 'load_cifar']


class _Array:
    """A pickled ``uint8`` numpy array, built by :class:`CIFARUnpickler`
    from its BUILD state: only the shape and the raw bytes are used (never
    numpy's pickled dtype state, which can make numpy read file bytes as
    object pointers)."""

    def __init__(self, *args):
        self.array = None

    def __setstate__(self, state):
        version, shape, dtype, _, data = state
        if not (isinstance(dtype, _UInt8) and type(shape) is tuple and all(
                type(n) is int and n >= 0 for n in shape)):
            raise pickle.UnpicklingError(f'not a uint8 array: {shape!r}')
        if type(data) is str:  # Python 2 pickles: latin1 bytes
            data = data.encode('latin1')
        self.array = np.frombuffer(data, np.uint8).reshape(shape).copy()


class _UInt8:
    """``numpy.dtype('u1')``; its pickled state is ignored."""

    def __init__(self, spec, *args):
        if spec != 'u1':
            raise pickle.UnpicklingError(f'numpy dtype {spec!r} (CIFAR '
                                         'files hold uint8 arrays only)')

    def __setstate__(self, state):
        pass


def _unwrap(value):
    if isinstance(value, _Array):
        return value.array
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


class CIFARUnpickler(pickle._Unpickler):
    """Unpickles the CIFAR "python version" files and nothing else: dicts
    of ``str``, ``int``, lists and ``uint8`` numpy arrays (re-pickled
    copies also name ``_codecs.encode`` for bytes). Every other global is
    refused before it is imported. It is Python's pure-Python unpickler,
    whose memo is a dict: the C one allocates a memo array as long as the
    largest index a file names (9 bytes can ask for gigabytes)."""

    GLOBALS = {
        'numpy.core.multiarray._reconstruct': _Array,
        'numpy._core.multiarray._reconstruct': _Array,
        'numpy.ndarray': _Array,
        'numpy.dtype': _UInt8,
    }

    def find_class(self, module: str, name: str) -> Any:
        full = f'{module}.{name}'
        if full in self.GLOBALS:
            return self.GLOBALS[full]
        if full == '_codecs.encode':
            import _codecs
            return _codecs.encode
        raise pickle.UnpicklingError(
            f'global {full} is not allowed in a CIFAR file (only numpy '
            'arrays are): refused before importing it')


def load_cifar(data: bytes, path: str) -> Any:
    """Unpickle a CIFAR file's bytes with :class:`CIFARUnpickler`; an
    ``UnpicklingError`` naming ``path`` if it holds anything else than a
    dict of what the real files hold."""
    try:
        loaded = CIFARUnpickler(io.BytesIO(data), encoding='latin1').load()
        if not isinstance(loaded, dict):
            raise TypeError(f'it holds a {type(loaded).__name__}, not a dict')
    except Exception as error:  # noqa: BLE001  anything: not a CIFAR file
        raise pickle.UnpicklingError(
            f'{path} is not a CIFAR "python version" file ('
            f'{type(error).__name__}: {error}). Nothing from it was '
            'executed. Re-extract it from the official archive.') from None
    return _unwrap(loaded)


class _LocalCIFARMixin:
    """Replace mmpretrain's download-or-fail integrity check."""

    def __init__(self, data_root: str = '', split: str = 'train',
                 verify_md5: bool = True, download: bool = False, **kwargs):
        if download:
            raise ValueError(
                f'{type(self).__name__} never downloads (download=True was '
                f'given). Download {self.url} yourself and extract it into '
                'data_root.')
        self.verify_md5, self._verified = verify_md5, False
        super().__init__(  # mmpretrain's CIFAR10 / CIFAR100
            data_root=data_root, split=split, download=False, **kwargs)

    @classmethod
    def expected_layout(cls, root: str) -> str:
        """The files under ``root`` (the config's data_root) and where they
        come from."""
        root = root.rstrip('/') or '/'
        files = [f for f, _ in cls.train_list + cls.test_list]
        files.append(cls.meta['filename'])
        tree = '\n'.join(f'        {f}' for f in files)
        return (f'    {root}/\n      {cls.base_folder}/\n{tree}\n'
                f'(the "python version" archive {osp.basename(cls.url)} '
                f'from {cls.url}, extracted into {root})')

    @classmethod
    def needed_files(cls, root: str, split: str = 'train') -> list:
        """``(path, md5)`` of the files ``split`` reads."""
        needed = cls.train_list if split == 'train' else cls.test_list
        entries = list(needed) + [[cls.meta['filename'], cls.meta['md5']]]
        return [(join_path(root, cls.base_folder, f), md5)
                for f, md5 in entries]

    def _check_integrity(self) -> bool:
        if self._verified:
            return True
        root = self.data_prefix['root']
        paths = self.needed_files(root, self.split)
        missing = [p for p, _ in paths if not osp.isfile(p)]
        if missing:
            raise FileNotFoundError(
                f'{type(self).__name__} (split={self.split!r}) is missing '
                f'{len(missing)} file(s): {", ".join(missing)}. Expected '
                f'layout (nothing is downloaded):\n'
                f'{self.expected_layout(root)}')
        if self.verify_md5:
            bad = [p for p, md5 in paths if not check_md5(p, md5)]
            if bad:
                raise RuntimeError(
                    f'{type(self).__name__}: {", ".join(bad)} differ from '
                    f'the official release (md5 sums of {self.url}): '
                    'corrupt, or not the official files. Download the '
                    'archive again and extract it into '
                    f'{root}.\n{self.expected_layout(root)}')
        self._verified = True
        return True

    def _read(self, name: str, keys: tuple) -> dict:
        path = join_path(self.data_prefix['root'], self.base_folder, name)
        entry = load_cifar(get(path), path)
        if not all(k in entry for k in keys):
            raise ValueError(f'{path}: expected a dict with {list(keys)}, '
                             f'found {sorted(entry)}')
        return entry

    def load_data_list(self) -> list:
        """mmpretrain's ``CIFAR10.load_data_list``, reading the files with
        :func:`load_cifar` (and checking what they hold)."""
        self._check_integrity()
        files = self.train_list if self.split == 'train' else self.test_list
        label_key = 'labels' if self.meta['key'] == 'label_names' \
            else 'fine_labels'
        imgs, gt_labels = [], []
        for name, _ in files:
            entry = self._read(name, ('data', label_key))
            data, labels = entry['data'], entry[label_key]
            if not (isinstance(data, np.ndarray) and data.dtype == np.uint8
                    and data.ndim == 2 and data.shape[1] == 3 * 32 * 32
                    and len(labels) == len(data)):
                raise ValueError(
                    f'{name}: data {getattr(data, "shape", data)!r} and '
                    f'{len(labels)} labels; expected (N, 3072) uint8 and N')
            num_classes = len(self.METAINFO['classes'])
            bad = [x for x in labels if type(x) is not int
                   or not 0 <= x < num_classes]
            if bad:
                raise ValueError(
                    f'{name}: labels {bad[:5]} are not class indices '
                    f'(integers in [0, {num_classes})); the file is not the '
                    'official one')
            imgs.append(data)
            gt_labels.extend(labels)
        imgs = np.vstack(imgs).reshape(-1, 3, 32, 32).transpose((0, 2, 3, 1))
        if self.CLASSES is None:
            self._load_meta()
        return [{'img': img, 'gt_label': label}
                for img, label in zip(imgs, gt_labels)]

    def _load_meta(self) -> None:
        self._check_integrity()
        data = self._read(self.meta['filename'], (self.meta['key'], ))
        self._metainfo.setdefault('classes', data[self.meta['key']])


@DATASETS.register_module()
class LocalCIFAR10(_LocalCIFARMixin, CIFAR10):
    """mmpretrain's ``CIFAR10`` that never downloads, from
    ``data_root/cifar-10-batches-py/{data_batch_1..5, test_batch,
    batches.meta}``.

    Args:
        verify_md5 (bool): check the official md5 sums (False for files you
            made in the same format). Defaults to True.
        download (bool): must be False (kept for config compatibility).
        data_root, split, **kwargs: as mmpretrain's ``CIFAR10``.
    """


@DATASETS.register_module()
class LocalCIFAR100(_LocalCIFARMixin, CIFAR100):
    """:class:`LocalCIFAR10` for ``data_root/cifar-100-python/{train, test,
    meta}``."""
