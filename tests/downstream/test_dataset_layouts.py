"""ADE20K, COCO, Flowers-102 and Stanford Cars: a missing dataset fails
before the run, naming what is missing and the layout expected; the tiny
datasets in the official layouts pass."""
import glob
import os
import os.path as osp
import shutil

import pytest
from mmengine.config import Config

from tlalign_mm.datasets import check_config_datasets
from tlalign_mm.datasets.layouts import check_dataset_layout
from tlalign_mm.datasets.synthetic import (
    write_ade20k,
    write_coco,
    write_flowers102,
    write_stanford_cars,
)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _configs(folder, pattern):
    return sorted(glob.glob(osp.join(ROOT, 'configs', folder, pattern)))


@pytest.mark.parametrize('config, kind, root, expected', [
    (_configs('upernet', '*tlalign*')[0], 'ADE20KDataset',
     'data/ade/ADEChallengeData2016', 'images/training/ADE_train_*.jpg'),
    (_configs('cascade_mask_rcnn', '*tlalign*')[0], 'CocoDataset',
     'data/coco', 'annotations/instances_train2017.json'),
    (_configs('transfer', '*flowers*')[0], 'Flowers102', 'data/flowers102',
     'imagelabels.mat    setid.mat'),
    (_configs('transfer', '*cars*')[0], 'StanfordCars', 'data/stanfordcars',
     'car_ims/000001.jpg ...    cars_annos.mat'),
], ids=['ade20k', 'coco', 'flowers102', 'stanford-cars'])
def test_missing_dataset_names_the_layout(tmp_path, monkeypatch, config,
                                          kind, root, expected):
    cfg = Config.fromfile(config)
    monkeypatch.chdir(tmp_path)  # the configs' data roots are relative
    with pytest.raises(FileNotFoundError) as error:
        check_config_datasets(cfg)
    message = str(error.value)
    assert message.startswith(f'{kind} (data_root=')
    assert root in message and 'is missing: ' in message
    assert 'Expected layout (nothing is downloaded)' in message
    assert expected in message


def _write(kind, root):
    return dict(ade20k=write_ade20k, coco=write_coco,
                flowers102=write_flowers102,
                cars=write_stanford_cars)[kind](str(root))


@pytest.mark.parametrize('kind, cfg', [
    ('ade20k', dict(type='ADE20KDataset', data_prefix=dict(
        img_path='images/training',
        seg_map_path='annotations/training'))),
    ('coco', dict(type='mmdet.CocoDataset',
                  ann_file='annotations/instances_train2017.json',
                  data_prefix=dict(img='train2017/'))),
    ('flowers102', dict(type='Flowers102', split='trainval')),
    ('cars', dict(type='StanfordCars', split='test')),
])
def test_official_layouts_pass_and_a_missing_file_is_named(tmp_path, kind,
                                                           cfg):
    root = _write(kind, tmp_path / kind)
    cfg = dict(cfg, data_root=root)
    check_dataset_layout(cfg)
    check_config_datasets(dict(train_dataloader=dict(dataset=dict(
        type='RepeatDataset', times=2, dataset=cfg))))
    # remove one thing it reads: named in the error
    gone = {'ade20k': 'annotations/training', 'coco':
            'annotations/instances_train2017.json', 'flowers102':
            'setid.mat', 'cars': 'cars_annos.mat'}[kind]
    path = osp.join(root, gone)
    if osp.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
    with pytest.raises(FileNotFoundError, match='is missing: .*' +
                       osp.basename(gone)):
        check_config_datasets(dict(val_dataloader=dict(dataset=dict(
            type='ConcatDataset', datasets=[cfg]))))


def test_other_datasets_and_remote_roots_are_not_checked():
    """Only local roots of the four layouts are checked: the same missing
    COCO fails on disk, not on s3; a CustomDataset is left to mmpretrain."""
    with pytest.raises(FileNotFoundError, match='CocoDataset'):
        check_dataset_layout(dict(type='CocoDataset', data_root='/nowhere',
                                  ann_file='a.json'))
    assert check_dataset_layout(dict(type='CocoDataset',
                                     data_root='s3://bucket/',
                                     ann_file='a.json')) is None
    assert check_dataset_layout(dict(type='CustomDataset',
                                     data_root='/nowhere')) is None
