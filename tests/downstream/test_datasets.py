"""Datasets of the transfer and robustness configs on tiny files in the
official layouts; no dataset ever reaches the network."""
import json
import os
import os.path as osp
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tlalign_mm.downstream  # noqa: F401
from tlalign_mm.datasets import (
    CORRUPTIONS,
    ImageNetA,
    ImageNetC,
    ImageNetR,
    ImageNetV2,
    LocalCIFAR10,
    LocalCIFAR100,
    imagenet_synsets,
    subset_synsets,
)
from tlalign_mm.datasets.synthetic import (
    write_cifar,
    write_class_folders,
    write_flowers102,
    write_imagenet_c,
    write_stanford_cars,
)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download attempt fails the test."""
    import mmpretrain.datasets.cifar as cifar

    def refuse(*args, **kwargs):
        raise AssertionError('a dataset tried to download')

    monkeypatch.setattr(cifar, 'download_and_extract_archive', refuse)


@pytest.mark.parametrize('cls,kind,folder', [
    (LocalCIFAR10, 'cifar10', 'cifar-10-batches-py'),
    (LocalCIFAR100, 'cifar100', 'cifar-100-python'),
])
def test_cifar_missing_names_the_layout(tmp_path, cls, kind, folder):
    with pytest.raises(FileNotFoundError) as error:
        cls(data_root=str(tmp_path), split='train')
    message = str(error.value)
    assert f'{tmp_path}/\n      {folder}/' in message
    assert 'nothing is downloaded' in message
    with pytest.raises(ValueError, match='never downloads'):
        cls(data_root=str(tmp_path), download=True)


@pytest.mark.parametrize('cls,kind,n_classes', [(LocalCIFAR10, 'cifar10', 10),
                                                (LocalCIFAR100, 'cifar100',
                                                 100)])
def test_cifar_md5_checked_unless_disabled(tmp_path, cls, kind, n_classes):
    root = write_cifar(str(tmp_path), kind, per_file=2)
    with pytest.raises(RuntimeError, match='differ from the official') as err:
        cls(data_root=root, split='train')
    assert 'verify_md5' not in str(err.value)  # never suggested
    assert 'Download the archive again' in str(err.value)
    train = cls(data_root=root, split='train', verify_md5=False)
    test = cls(data_root=root, split='test', verify_md5=False)
    assert (len(train), len(test)) == (10, 2)
    item = train.get_data_info(0)
    assert item['img'].shape == (32, 32, 3) and item['img'].dtype == np.uint8
    assert 0 <= item['gt_label'] < n_classes
    assert len(train.metainfo['classes']) == n_classes


def test_flowers102_reads_the_official_mat_files(tmp_path):
    """mmpretrain's Flowers102 (used as it is) on scipy-written files."""
    from mmpretrain.datasets import Flowers102
    from scipy.io import loadmat
    root = write_flowers102(str(tmp_path))
    labels = loadmat(osp.join(root, 'imagelabels.mat'))['labels'][0]
    sizes = {'train': 2, 'val': 2, 'trainval': 4, 'test': 2}
    for split, size in sizes.items():
        dataset = Flowers102(data_root=root, split=split)
        assert len(dataset) == size
    test = Flowers102(data_root=root, split='test')
    info = test.get_data_info(0)
    assert info['img_path'].endswith('jpg/image_00005.jpg')
    assert info['gt_label'] == int(labels[4]) - 1


def test_stanford_cars_reads_cars_annos(tmp_path):
    from mmpretrain.datasets import StanfordCars
    root = write_stanford_cars(str(tmp_path))
    train = StanfordCars(data_root=root, split='train')
    test = StanfordCars(data_root=root, split='test')
    assert (len(train), len(test)) == (4, 2)
    assert test.get_data_info(0)['img_path'].endswith('car_ims/000005.jpg')
    assert all(0 <= train.get_data_info(i)['gt_label'] < 196
               for i in range(4))


def test_imagenet_label_space_matches_timm_indices():
    from importlib import resources

    import timm.data
    synsets = imagenet_synsets()
    for subset in ('imagenet_a', 'imagenet_r'):
        text = resources.files(timm.data).joinpath(
            '_info', f'{subset}_indices.txt').read_text()
        indices = [int(x) for x in text.split()]
        assert [synsets[i] for i in indices] == list(subset_synsets(subset))


@pytest.mark.parametrize('cls,subset', [(ImageNetA, 'imagenet_a'),
                                        (ImageNetR, 'imagenet_r')])
def test_imagenet_a_r(tmp_path, cls, subset):
    wnids = list(subset_synsets(subset))[:3]
    write_class_folders(str(tmp_path), wnids, per_class=2)
    dataset = cls(data_root=str(tmp_path))
    index = {s: i for i, s in enumerate(imagenet_synsets())}
    assert len(dataset) == 6
    assert [dataset.get_data_info(i)['gt_label'] for i in range(6)] == \
        [index[w] for w in wnids for _ in range(2)]
    meta = dataset.metainfo
    assert len(meta['classes']) == 1000
    assert meta['subset_indices'] == sorted(
        index[w] for w in subset_synsets(subset))
    os.makedirs(tmp_path / 'n99999999')
    with pytest.raises(FileNotFoundError, match='n99999999'):
        cls(data_root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match='Expected layout'):
        cls(data_root=str(tmp_path / 'missing'))


def test_imagenet_v2_labels_are_folder_numbers(tmp_path):
    write_class_folders(str(tmp_path), ['2', '10', '999'], ext='.jpeg')
    dataset = ImageNetV2(data_root=str(tmp_path))
    labels = [dataset.get_data_info(i)['gt_label'] for i in range(3)]
    paths = [dataset.get_data_info(i)['img_path'] for i in range(3)]
    assert labels == [2, 10, 999]
    assert [osp.basename(osp.dirname(p)) for p in paths] == \
        ['2', '10', '999']


def test_imagenet_c(tmp_path):
    wnids = imagenet_synsets()[:2]
    count = write_imagenet_c(str(tmp_path), CORRUPTIONS, range(1, 6), wnids)
    dataset = ImageNetC(data_root=str(tmp_path))
    assert len(dataset) == count == 15 * 5 * 2
    info = dataset.get_data_info(len(dataset) - 1)
    assert (info['corruption'], info['severity'], info['gt_label']) == \
        ('jpeg_compression', 5, 1)
    subset = ImageNetC(data_root=str(tmp_path), corruptions=['fog'],
                       severities=[3])
    assert len(subset) == 2
    os.rename(tmp_path / 'fog' / '3', tmp_path / 'fog' / 'x')
    with pytest.raises(FileNotFoundError, match='fog/3'):
        ImageNetC(data_root=str(tmp_path))


ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# Builds LocalCIFAR10 on a folder whose data_batch_1 is crafted, with md5
# verification off, and on (the expected md5 sums made to match the crafted
# files, as if an attacker controlled them too): a crash kills only this.
CIFAR_PROBE = """
import json, os, sys
from tlalign_mm.datasets import LocalCIFAR10
from mmpretrain.datasets.utils import calculate_md5
root, marker = sys.argv[1], sys.argv[2]
md5 = lambda f: calculate_md5(os.path.join(root, 'cifar-10-batches-py', f))
class Matching(LocalCIFAR10):
    train_list = [[f, md5(f)] for f, _ in LocalCIFAR10.train_list]
    meta = dict(LocalCIFAR10.meta, md5=md5('batches.meta'))
for verify, cls in ((False, LocalCIFAR10), (True, Matching)):
    try:
        cls(data_root=root, split='train', verify_md5=verify)
        outcome = 'loaded'
    except Exception as e:
        outcome = f'{type(e).__name__}: {e}'
    print(json.dumps(dict(verify_md5=verify, outcome=outcome,
                          payload_ran=os.path.exists(marker))), flush=True)
"""


class _OpensFile:

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, 'w'))


@pytest.mark.e2e
@pytest.mark.parametrize('payload', ['code', 'hidden_object_dtype'])
def test_crafted_cifar_file_is_refused(tmp_path, payload):
    """A CIFAR batch file that runs code when unpickled, or holds a numpy
    dtype whose crafted state makes numpy read raw bytes as object
    pointers: refused with and without md5 verification; nothing runs."""
    from tests.crafted_checkpoints import hidden_object_array
    root = write_cifar(str(tmp_path / 'data'), 'cifar10', per_file=2)
    marker = str(tmp_path / 'payload_ran')
    batch = dict(data=np.zeros((2, 3072), np.uint8), labels=[0, 1],
                 filenames=['a', 'b'])
    if payload == 'code':
        batch['batch_label'] = _OpensFile(marker)
    else:
        batch['data'] = hidden_object_array()
    with open(osp.join(root, 'cifar-10-batches-py', 'data_batch_1'),
              'wb') as f:
        pickle.dump(batch, f, protocol=2)
    proc = subprocess.run(
        [sys.executable, '-c', CIFAR_PROBE, root, marker], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1'),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()
               if line.startswith('{')]
    assert [r['verify_md5'] for r in results] == [False, True]
    for result in results:
        assert result['outcome'].startswith('UnpicklingError: '), result
        assert 'data_batch_1 is not a CIFAR' in result['outcome']
        assert not result['payload_ran']
    assert ('global io.open is not allowed' if payload == 'code' else
            "numpy dtype 'f8' (CIFAR files hold uint8 arrays only)") in \
        results[0]['outcome']
