"""The on-disk layouts of OpenMMLab's own dataset classes the downstream
configs use (mmseg's ADE20K, mmdet's COCO, mmpretrain's Flowers-102 and
Stanford Cars), checked before a run: a missing one failed deep in the data
loading with a bare path. ``tools/train.py`` and ``tools/test.py`` call
:func:`check_config_datasets` before building anything, so these fail as
this package's own datasets do, with the layout expected. Nothing is ever
downloaded.
"""
import os.path as osp
from typing import Iterable, List, Mapping, Optional

__all__ = ['LAYOUTS', 'check_config_datasets', 'check_dataset_layout']

#: dataset type -> the layout it expects (``{root}``: its data_root)
LAYOUTS = {
    'ADE20KDataset':
    '{root}/\n'
    '  images/training/ADE_train_*.jpg     images/validation/ADE_val_*.jpg\n'
    '  annotations/training/ADE_train_*.png\n'
    '  annotations/validation/ADE_val_*.png\n'
    '(ADEChallengeData2016.zip from '
    'http://data.csail.mit.edu/places/ADEchallenge/ADEChallengeData2016.zip,'
    ' unzipped so that {root} is its ADEChallengeData2016 folder)',
    'CocoDataset':
    '{root}/\n'
    '  annotations/instances_train2017.json\n'
    '  annotations/instances_val2017.json\n'
    '  train2017/*.jpg    val2017/*.jpg\n'
    '(train2017.zip, val2017.zip and annotations_trainval2017.zip from '
    'https://cocodataset.org/#download, unzipped into {root})',
    'Flowers102':
    '{root}/\n'
    '  jpg/image_00001.jpg ... image_08189.jpg\n'
    '  imagelabels.mat    setid.mat\n'
    '(102flowers.tgz, imagelabels.mat and setid.mat from '
    'https://www.robots.ox.ac.uk/~vgg/data/flowers/102/)',
    'StanfordCars':
    '{root}/\n'
    '  car_ims/000001.jpg ...    cars_annos.mat\n'
    'or\n'
    '  cars_train/*.jpg    cars_test/*.jpg\n'
    '  devkit/cars_train_annos.mat    '
    'devkit/cars_test_annos_withlabels.mat\n'
    '(the Stanford Cars release, '
    'https://ai.stanford.edu/~jkrause/cars/car_dataset.html)',
}


def _join(root: Optional[str], path: Optional[str]) -> Optional[str]:
    if not path:
        return root
    return path if root is None or osp.isabs(path) else osp.join(root, path)


def _missing(cfg: Mapping, kind: str) -> List[str]:
    """The expected paths of ``cfg`` that do not exist."""
    root = cfg.get('data_root', None)
    if kind == 'Flowers102':
        need = [_join(root, p) for p in ('jpg', 'imagelabels.mat',
                                        'setid.mat')]
    elif kind == 'StanfordCars':
        flat = [_join(root, 'car_ims'), _join(root, 'cars_annos.mat')]
        split = cfg.get('split', 'train')
        folder = 'cars_test' if split == 'test' else 'cars_train'
        annos = ('cars_test_annos_withlabels.mat' if split == 'test'
                 else 'cars_train_annos.mat')
        devkit = [_join(root, folder), _join(root, osp.join('devkit', annos))]
        if all(osp.exists(p) for p in flat):
            return []
        need = devkit if osp.exists(_join(root, 'devkit')) else flat
    else:
        prefix = cfg.get('data_prefix', None) or {}
        need = [_join(root, p) for p in prefix.values()] if isinstance(
            prefix, Mapping) else [_join(root, prefix)]
        if cfg.get('ann_file'):
            need.append(_join(root, cfg['ann_file']))
    return [p for p in need if p and not osp.exists(p)]


def check_dataset_layout(cfg: Mapping) -> None:
    """A ``FileNotFoundError`` naming the missing paths and the layout if
    the dataset ``cfg`` builds is one of :data:`LAYOUTS` and misses files."""
    kind = str(cfg.get('type', '')).split('.')[-1]
    if kind not in LAYOUTS:
        return
    root = cfg.get('data_root', None)
    if root is not None and '://' in str(root):
        return  # a remote backend: nothing to check on local disk
    missing = _missing(cfg, kind)
    if missing:
        raise FileNotFoundError(
            f'{kind} (data_root={root!r}) is missing: {", ".join(missing)}. '
            'Expected layout (nothing is downloaded):\n' +
            LAYOUTS[kind].format(root=str(root).rstrip('/') if root else '.'))


def _datasets(cfg: Mapping) -> Iterable[Mapping]:
    """A dataset config and those it wraps (``dataset``, ``datasets``)."""
    yield cfg
    inner = cfg.get('dataset', None)
    if isinstance(inner, Mapping):
        yield from _datasets(inner)
    for item in cfg.get('datasets', None) or []:
        if isinstance(item, Mapping):
            yield from _datasets(item)


LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


def check_config_datasets(cfg: Mapping,
                          loaders: Iterable[str] = LOADERS) -> None:
    """:func:`check_dataset_layout` for the datasets of ``cfg``'s
    ``loaders`` (those set and not None)."""
    for key in loaders:
        loader = cfg.get(key, None)
        if isinstance(loader, Mapping) and isinstance(
                loader.get('dataset', None), Mapping):
            for dataset in _datasets(loader['dataset']):
                check_dataset_layout(dataset)
