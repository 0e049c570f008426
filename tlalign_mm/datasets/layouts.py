"""The on-disk layouts of the dataset types the configs use, checked
before a run: ``tools/train.py`` and ``tools/test.py`` call
:func:`check_config_datasets` before building anything, so a dataset whose
root or split folder does not exist fails at once, naming the missing path
and the layout expected, not after the Runner, its work dir and the other
datasets were built (mmpretrain's ImageNet said only "No such file or
directory: 'data/imagenet/train'", 434 lines into the log). OpenMMLab's own
classes (mmpretrain's ImageNet, Flowers-102 and Stanford Cars, mmseg's
ADE20K, mmdet's COCO) have their layout in :data:`LAYOUTS`; this package's
(local CIFAR, Tiny-ImageNet, ImageNet-A/R/V2/C) in their classes, which
check the contents further when they load. Digits ships with
scikit-learn. Nothing is ever downloaded.
"""
import os.path as osp
from typing import Callable, Dict, Iterable, List, Mapping, Optional

from .cifar import LocalCIFAR10, LocalCIFAR100
from .imagenet_robustness import ImageNetA, ImageNetC, ImageNetR, ImageNetV2
from .tiny_imagenet import TinyImageNet

__all__ = ['LAYOUTS', 'check_config_datasets', 'check_dataset_layout']

#: dataset type -> the layout it expects (``{root}``: its data_root)
LAYOUTS = {
    'ImageNet':
    '{root}/\n'
    '  train/n01440764/*.JPEG ...   (the 1,000 WordNet-id class folders)\n'
    '  val/n01440764/*.JPEG ...     (the same folders; or the images flat '
    'with meta/val.txt)\n'
    '  meta/train.txt  meta/val.txt (optional: "<path> <label>" lines)\n'
    '(ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar from '
    'https://image-net.org/download.php, extracted into {root})',
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


#: this package's dataset types -> their layout (``root`` -> text)
OWN_LAYOUTS: Dict[str, Callable[[str], str]] = {
    'LocalCIFAR10': LocalCIFAR10.expected_layout,
    'LocalCIFAR100': LocalCIFAR100.expected_layout,
    'TinyImageNet': lambda root: TinyImageNet.LAYOUT.format(
        cls='TinyImageNet', root=root),
    **{cls.__name__: cls.LAYOUT.format for cls in (
        ImageNetA, ImageNetR, ImageNetV2, ImageNetC)},
}
_CIFAR = {'LocalCIFAR10': LocalCIFAR10, 'LocalCIFAR100': LocalCIFAR100}


def _layout(kind: str, root: str) -> str:
    if kind in OWN_LAYOUTS:
        return OWN_LAYOUTS[kind](root=root)
    return LAYOUTS[kind].format(root=root)


def _join(root: Optional[str], path: Optional[str]) -> Optional[str]:
    if not path:
        return root
    return path if root is None or osp.isabs(path) else osp.join(root, path)


def _missing(cfg: Mapping, kind: str) -> List[str]:
    """The expected paths of ``cfg`` that do not exist."""
    root = cfg.get('data_root', None)
    if kind in _CIFAR:
        return [p for p, _ in _CIFAR[kind].needed_files(
            root or '', cfg.get('split', 'train')) if not osp.isfile(p)]
    if kind in ('ImageNetA', 'ImageNetR', 'ImageNetV2', 'ImageNetC'):
        need = [root or '.']
    elif kind in ('ImageNet', 'TinyImageNet'):  # split: the default prefix
        prefix = cfg.get('data_prefix', None) or cfg.get('split', None)
        need = [_join(root, p) for p in prefix.values()] if isinstance(
            prefix, Mapping) else [_join(root, prefix)]
        if cfg.get('ann_file'):
            need.append(_join(root, cfg['ann_file']))
    elif kind == 'Flowers102':
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
    if kind not in LAYOUTS and kind not in OWN_LAYOUTS:
        return
    root = cfg.get('data_root', None)
    if root is not None and '://' in str(root):
        return  # a remote backend: nothing to check on local disk
    missing = _missing(cfg, kind)
    if missing:
        raise FileNotFoundError(
            f'{kind} (data_root={root!r}) is missing: {", ".join(missing)}. '
            'Expected layout (nothing is downloaded):\n' +
            _layout(kind, str(root).rstrip('/') if root else '.'))


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
