"""ImageNet test sets in ImageNet-1k's label space: ``ImageNetA``,
``ImageNetR`` (200-class subsets), ``ImageNetV2`` (folders named by class
index) and ``ImageNetC`` (corruption/severity folders). The class order
(sorted WordNet ids) and the A/R subsets are timm's bundled info files."""
import os
import os.path as osp
from functools import lru_cache
from importlib import resources
from typing import Dict, List, Optional, Sequence

from mmpretrain.datasets import BaseDataset
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.registry import DATASETS
from torchvision.datasets.folder import IMG_EXTENSIONS

__all__ = [
    'CORRUPTIONS', 'ImageNetA', 'ImageNetC', 'ImageNetR', 'ImageNetV2',
    'imagenet_synsets', 'subset_synsets'
]

#: The 15 ImageNet-C corruptions mCE averages over (Hendrycks & Dietterich,
#: ICLR 2019), in order; the four "extra" ones are not part of mCE.
CORRUPTIONS = ('gaussian_noise', 'shot_noise', 'impulse_noise',
               'defocus_blur', 'glass_blur', 'motion_blur', 'zoom_blur',
               'snow', 'frost', 'fog', 'brightness', 'contrast',
               'elastic_transform', 'pixelate', 'jpeg_compression')


def _timm_info(name: str) -> List[str]:
    text = resources.files('timm.data').joinpath('_info', name).read_text()
    return [line.strip() for line in text.splitlines() if line.strip()]


@lru_cache(maxsize=None)
def imagenet_synsets() -> tuple:
    """ImageNet-1k's 1000 WordNet ids in class-index order (sorted)."""
    synsets = tuple(_timm_info('imagenet_synsets.txt'))
    assert len(synsets) == 1000 and list(synsets) == sorted(synsets)
    return synsets


@lru_cache(maxsize=None)
def subset_synsets(subset: str) -> tuple:
    """WordNet ids of ``'imagenet_a'`` or ``'imagenet_r'`` (200 each)."""
    if subset not in ('imagenet_a', 'imagenet_r'):
        raise ValueError(f'unknown ImageNet subset {subset!r}')
    synsets = tuple(_timm_info(f'{subset}_synsets.txt'))
    assert len(synsets) == 200
    return synsets


def _synset_index() -> Dict[str, int]:
    return {s: i for i, s in enumerate(imagenet_synsets())}


def _images(folder: str) -> List[str]:
    return sorted(f for f in os.listdir(folder)
                  if f.lower().endswith(IMG_EXTENSIONS))


def _subdirs(folder: str) -> List[str]:
    return sorted(d for d in os.listdir(folder)
                  if osp.isdir(osp.join(folder, d)))


class _FolderTestSet(BaseDataset):
    """A test-only folder dataset in ImageNet-1k's label space: a subclass
    lists its samples (:meth:`_samples`) of a ``LAYOUT``."""

    METAINFO = {'classes': IMAGENET_CATEGORIES}
    LAYOUT = ''

    def __init__(self, data_root: str, pipeline: Sequence = (),
                 metainfo: Optional[dict] = None, **kwargs):
        metainfo = dict(self._extra_metainfo(), **(metainfo or {}))
        super().__init__(ann_file='', metainfo=metainfo, data_root=data_root,
                         data_prefix='', test_mode=True, pipeline=pipeline,
                         **kwargs)

    def _extra_metainfo(self) -> dict:
        return {}

    def load_data_list(self) -> List[dict]:
        root = self.data_root
        if not osp.isdir(root):
            raise FileNotFoundError(
                f'{type(self).__name__}: no folder {root!r}. Expected '
                f'layout:\n{self.LAYOUT.format(root=root)}')
        data_list = self._samples(root)
        if not data_list:
            self._fail(root, 'no images')
        return data_list

    def _fail(self, root: str, what: str):
        raise FileNotFoundError(
            f'{type(self).__name__}: {what} in {root!r}. Expected layout:\n'
            f'{self.LAYOUT.format(root=root)}')


class _SubsetFolder(_FolderTestSet):
    SUBSET = ''

    def _extra_metainfo(self) -> dict:
        index = _synset_index()
        return dict(
            subset=self.SUBSET,
            subset_indices=sorted(index[s]
                                  for s in subset_synsets(self.SUBSET)))

    def _samples(self, root: str) -> List[dict]:
        index = _synset_index()
        allowed = set(subset_synsets(self.SUBSET))
        folders = _subdirs(root)
        unknown = [d for d in folders if d not in allowed]
        if unknown:
            self._fail(root, f'folder(s) {unknown[:5]} are not '
                       f'{self.SUBSET} WordNet ids')
        return [dict(img_path=osp.join(root, wnid, name), gt_label=index[wnid])
                for wnid in folders for name in _images(osp.join(root, wnid))]


@DATASETS.register_module()
class ImageNetA(_SubsetFolder):
    """ImageNet-A (Hendrycks et al., 2021): 7,500 natural adversarial
    examples of 200 classes, labelled with ImageNet-1k indices;
    :class:`SubsetAccuracy` restricts the prediction to the 200 of
    ``metainfo['subset_indices']`` (the standard protocol)."""
    SUBSET = 'imagenet_a'
    LAYOUT = ('    {root}/\n      n01498041/*.jpg\n      ...  '
              '(200 WordNet-id folders: the extracted imagenet-a.tar)')


@DATASETS.register_module()
class ImageNetR(_SubsetFolder):
    """ImageNet-R (Hendrycks et al., 2021): 30,000 renditions of 200
    ImageNet classes. Labels and evaluation as :class:`ImageNetA`."""
    SUBSET = 'imagenet_r'
    LAYOUT = ('    {root}/\n      n01443537/*.jpg\n      ...  '
              '(200 WordNet-id folders: the extracted imagenet-r.tar)')


@DATASETS.register_module()
class ImageNetV2(_FolderTestSet):
    """ImageNetV2 (Recht et al., 2019), e.g. MatchedFrequency, whose
    folders are ImageNet-1k class *indices*: the name is the label (sorted
    names, as mmpretrain's ``CustomDataset``, put ``'10'`` before ``'2'``).
    """
    LAYOUT = ('    {root}/\n      0/*.jpeg\n      1/*.jpeg\n      ...\n'
              '      999/*.jpeg  (e.g. the extracted '
              'imagenetv2-matched-frequency.tar.gz)')

    def _samples(self, root: str) -> List[dict]:
        folders = _subdirs(root)
        bad = [d for d in folders if not d.isdigit() or int(d) > 999]
        if bad:
            self._fail(root, f'folder(s) {bad[:5]} are not class indices')
        return [dict(img_path=osp.join(root, d, name), gt_label=int(d))
                for d in sorted(folders, key=int)
                for name in _images(osp.join(root, d))]


@DATASETS.register_module()
class ImageNetC(_FolderTestSet):
    """ImageNet-C (Hendrycks & Dietterich, 2019), of the ``corruptions``
    (default: the 15 of mCE) and ``severities`` (1-5) under ``data_root``.
    Each sample carries its ``corruption`` and ``severity``: keep them with
    ``PackInputs(meta_keys=(..., 'corruption', 'severity'))`` for
    :class:`CorruptionError` (mCE)."""
    LAYOUT = ('    {root}/\n      gaussian_noise/\n        1/n01440764/*.JPEG'
              '\n        ...\n        5/...\n      shot_noise/...\n      ...'
              '  (one folder per corruption, 1-5 per severity, the 1000 '
              'ImageNet WordNet ids below)')

    def __init__(self, data_root: str,
                 corruptions: Sequence[str] = CORRUPTIONS,
                 severities: Sequence[int] = (1, 2, 3, 4, 5), **kwargs):
        self.corruptions = tuple(corruptions)
        self.severities = tuple(int(s) for s in severities)
        super().__init__(data_root=data_root, **kwargs)

    def _samples(self, root: str) -> List[dict]:
        index = _synset_index()
        missing = [
            f'{c}/{s}' for c in self.corruptions for s in self.severities
            if not osp.isdir(osp.join(root, c, str(s)))
        ]
        if missing:
            self._fail(root, f'missing {len(missing)} corruption/severity '
                       f'folder(s): {missing[:5]}')
        data_list = []
        for c in self.corruptions:
            for s in self.severities:
                folder = osp.join(root, c, str(s))
                for wnid in _subdirs(folder):
                    if wnid not in index:
                        self._fail(folder, f'{wnid!r} is no ImageNet id')
                    for name in _images(osp.join(folder, wnid)):
                        data_list.append(
                            dict(img_path=osp.join(folder, wnid, name),
                                 gt_label=index[wnid], corruption=c,
                                 severity=s))
        return data_list
