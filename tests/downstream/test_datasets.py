"""Datasets of the configs on tiny files in the official layouts: a
missing dataset (every type the configs use) fails before the run, naming
what is missing and the layout expected; nothing is ever downloaded; a
crafted CIFAR file runs nothing. (ImageNet-A/R/V2/C's contents:
test_robustness.py.)"""
import glob
import os
import os.path as osp
import pickle
import shutil

import numpy as np
import pytest
from mmengine.config import Config

import tlalign_mm.downstream  # noqa: F401
from tests.cli import ROOT
from tests.crafted_checkpoints import _Reduce, hidden_object_array
from tlalign_mm.datasets import (
    LocalCIFAR10,
    LocalCIFAR100,
    check_config_datasets,
)
from tlalign_mm.datasets.imagenet_robustness import (
    CORRUPTIONS,
    imagenet_synsets,
    subset_synsets,
)
from tlalign_mm.datasets.layouts import (
    LAYOUTS,
    OWN_LAYOUTS,
    _datasets,
    check_dataset_layout,
)
from tlalign_mm.datasets.synthetic import (
    write_ade20k,
    write_cifar,
    write_class_folders,
    write_coco,
    write_flowers102,
    write_imagenet,
    write_imagenet_c,
    write_stanford_cars,
    write_tiny_imagenet,
)
from tlalign_mm.testing.configs import config_paths, load


@pytest.mark.parametrize('folder, kind, writer, root, layout, read', [
    ('upernet/*tlalign', 'ADE20KDataset', write_ade20k,
     'data/ade/ADEChallengeData2016',
     'images/training/ADE_train_*.jpg', 'annotations/training'),
    ('cascade_mask_rcnn/*tlalign', 'CocoDataset', write_coco, 'data/coco',
     'annotations/instances_train2017.json',
     'annotations/instances_train2017.json'),
    ('transfer/*tlalign*flowers', 'Flowers102', write_flowers102,
     'data/flowers102',
     'imagelabels.mat    setid.mat', 'setid.mat'),
    ('transfer/*tlalign*cars', 'StanfordCars', write_stanford_cars,
     'data/stanfordcars', 'car_ims/000001.jpg ...    cars_annos.mat',
     'cars_annos.mat'),
    # issue 41: ImageNet, the dataset of every TL-Align config, failed 434
    # lines into the log with a bare path; this package's own types named
    # their layout only once the Runner and the other datasets were built
    ('tlalign/deit-tiny_4xb256-tlalign', 'ImageNet', write_imagenet,
     'data/imagenet', 'train/n01440764/*.JPEG', 'train'),
    ('sl_vit/vit_1xb128-tlalign_cifar10', 'LocalCIFAR10',
     lambda root: write_cifar(root, 'cifar10'), 'data/cifar10',
     'cifar-10-batches-py/', 'cifar-10-batches-py/data_batch_3'),
    ('sl_vit/vit_1xb128-tlalign_cifar100', 'LocalCIFAR100',
     lambda root: write_cifar(root, 'cifar100'), 'data/cifar100',
     'cifar-100-python/', 'cifar-100-python/meta'),
    ('sl_vit/vit_1xb128-tlalign_tiny', 'TinyImageNet', write_tiny_imagenet,
     'data/tiny-imagenet-200', 'train/<wnid>/images/*.JPEG', 'val'),
    ('robustness/deit-tiny_in1k_test-imagenet-a', 'ImageNetA',
     lambda root: write_class_folders(root, subset_synsets('imagenet_a')[:2]),
     'data/imagenet-a', 'the extracted imagenet-a.tar', ''),
    ('robustness/deit-tiny_in1k_test-imagenet-r', 'ImageNetR',
     lambda root: write_class_folders(root, subset_synsets('imagenet_r')[:2]),
     'data/imagenet-r', 'the extracted imagenet-r.tar', ''),
    ('robustness/deit-tiny_in1k_test-imagenet-v2', 'ImageNetV2',
     lambda root: write_class_folders(root, ['0', '1']),
     'data/imagenetv2-matched-frequency-format-val', '999/*.jpeg', ''),
    ('robustness/deit-tiny_in1k_test-imagenet-c', 'ImageNetC',
     lambda root: write_imagenet_c(root, CORRUPTIONS, range(1, 6),
                                   imagenet_synsets()[:1]),
     'data/imagenet-c', 'gaussian_noise/', ''),
])
def test_a_missing_dataset_names_the_layout_and_the_file(
        tmp_path, monkeypatch, folder, kind, writer, root, layout, read):
    cfg = Config.fromfile(sorted(glob.glob(osp.join(
        ROOT, 'configs', folder + '*.py')))[0])
    # a test config: its test data (it trains on ImageNet)
    loaders = ['test_dataloader'] if folder.startswith('robustness') else \
        ['train_dataloader', 'val_dataloader', 'test_dataloader']
    monkeypatch.chdir(tmp_path)  # the configs' data roots are relative
    with pytest.raises(FileNotFoundError) as error:
        check_config_datasets(cfg, loaders)
    message = str(error.value)
    assert message.startswith(f'{kind} (data_root=')
    assert root in message and 'is missing: ' in message
    assert 'Expected layout (nothing is downloaded)' in message
    assert layout in message
    writer(root)  # the official layout, tiny: it passes
    check_config_datasets(cfg, loaders)
    path = osp.join(root, read)  # remove one thing it reads: named
    shutil.rmtree(path) if osp.isdir(path) else os.remove(path)
    with pytest.raises(FileNotFoundError,
                       match='is missing: .*' + osp.basename(
                           path.rstrip('/'))):
        check_config_datasets(cfg, loaders)


def test_every_dataset_type_of_the_configs_has_a_layout():
    """Every dataset a config reads from disk is checked before the run
    (Digits ships with scikit-learn)."""
    kinds = {str(d.get('type')).split('.')[-1] for path in config_paths()
             for key in ('train_dataloader', 'val_dataloader',
                         'test_dataloader')
             if (loader := load(path).get(key)) and loader.get('dataset')
             for d in _datasets(loader['dataset'])}
    assert kinds - set(LAYOUTS) - set(OWN_LAYOUTS) == {'Digits'}


def test_other_datasets_and_remote_roots_are_not_checked():
    assert check_dataset_layout(dict(type='CocoDataset', ann_file='a.json',
                                     data_root='s3://bucket/')) is None
    assert check_dataset_layout(dict(type='CustomDataset',
                                     data_root='/nowhere')) is None


@pytest.mark.parametrize('cls, kind, folder, classes', [
    (LocalCIFAR10, 'cifar10', 'cifar-10-batches-py', 10),
    (LocalCIFAR100, 'cifar100', 'cifar-100-python', 100)])
def test_cifar_never_downloads_and_checks_md5_unless_told(
        tmp_path, cls, kind, folder, classes):
    with pytest.raises(FileNotFoundError) as error:
        cls(data_root=str(tmp_path), split='train')
    assert f'{tmp_path}/\n      {folder}/' in str(error.value)
    assert 'nothing is downloaded' in str(error.value)
    with pytest.raises(ValueError, match='never downloads'):
        cls(data_root=str(tmp_path), download=True)
    root = write_cifar(str(tmp_path), kind, per_file=2)
    with pytest.raises(RuntimeError, match='differ from the official') as err:
        cls(data_root=root, split='train')
    assert 'verify_md5' not in str(err.value)  # never suggested
    assert 'Download the archive again' in str(err.value)
    train = cls(data_root=root, split='train', verify_md5=False)
    assert len(train) == 10 and len(train.metainfo['classes']) == classes
    item = train.get_data_info(0)
    assert item['img'].shape == (32, 32, 3) and item['img'].dtype == np.uint8


@pytest.mark.parametrize('payload', ['code', 'hidden_object_dtype'])
def test_a_crafted_cifar_file_is_refused_and_runs_nothing(tmp_path, payload):
    """A batch file that runs code when unpickled, or holds a numpy dtype
    whose crafted state reads raw bytes as object pointers."""
    root = write_cifar(str(tmp_path / 'data'), 'cifar10', per_file=2)
    marker = tmp_path / 'payload_ran'
    batch = dict(data=np.zeros((2, 3072), np.uint8), labels=[0, 1],
                 filenames=['a', 'b'])
    if payload == 'code':
        batch['batch_label'] = _Reduce(open, (str(marker), 'w'))
    else:
        batch['data'] = hidden_object_array()
    with open(osp.join(root, 'cifar-10-batches-py', 'data_batch_1'),
              'wb') as f:
        pickle.dump(batch, f, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match=(
            'data_batch_1 is not a CIFAR.*' + (
                'global io.open is not allowed' if payload == 'code' else
                "numpy dtype 'f8' \\(CIFAR files hold uint8 arrays only")
    )):
        LocalCIFAR10(data_root=root, split='train', verify_md5=False)
    assert not marker.exists()
