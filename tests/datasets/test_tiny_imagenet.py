"""TinyImageNet: the two splits must have the same class folders."""
import shutil

import pytest

from tlalign_mm.datasets import TinyImageNet
from tlalign_mm.datasets.synthetic import write_class_folders

CLASSES = ['n001', 'n002', 'n003', 'n004']


@pytest.mark.parametrize('split', ['val', 'train'])
def test_a_class_folder_missing_from_one_split_fails(tmp_path, split):
    """The archive's layouts (train/<wnid>/images/, val/<wnid>/) read with
    one label space; hole 6: without val/n002, val mapped n003 to 1 while
    train mapped it to 2, silently."""
    write_class_folders(str(tmp_path / 'train'),
                        [f'{c}/images' for c in CLASSES], per_class=1)
    write_class_folders(str(tmp_path / 'val'), CLASSES, per_class=1)
    train, val = (TinyImageNet(data_root=str(tmp_path), split=s,
                               serialize_data=False) for s in ('train', 'val'))
    assert train.CLASSES == val.CLASSES == tuple(CLASSES)
    assert sorted(val.get_gt_labels()) == sorted(train.get_gt_labels()) == [
        0, 1, 2, 3]
    shutil.rmtree(tmp_path / split / 'n002')
    for built in ('train', 'val'):
        with pytest.raises(FileNotFoundError, match=r"lacks \['n002'\]|"
                           r"has extra \['n002'\]"):
            TinyImageNet(data_root=str(tmp_path), split=built)


def test_data_prefix_is_refused_not_read_in_place_of_split(tmp_path):
    """mmpretrain's CustomDataset reads data_prefix: given, it was read and
    split ignored (split='val', data_prefix='train' read the training
    images, and checked train's class folders against themselves)."""
    write_class_folders(str(tmp_path / 'train'),
                        [f'{c}/images' for c in CLASSES], per_class=1)
    write_class_folders(str(tmp_path / 'val'), CLASSES, per_class=1)
    with pytest.raises(ValueError, match=r"data_prefix='train': remove it "
                       'and set split'):
        TinyImageNet(data_root=str(tmp_path), split='val',
                     data_prefix='train')
    val = TinyImageNet(data_root=str(tmp_path), split='val')
    assert all('/val/' in val.get_data_info(i)['img_path']
               for i in range(len(val)))


def test_an_image_past_the_pixel_bound_is_refused_before_decoding(
        tmp_path, monkeypatch):
    """Issue 39, item 8: a 4,096x4,096 PNG of a few KB (PIL would decode
    48 MB and only warn below 178 M pixels) fails naming the file, before
    the pipeline sees it; a 64x64 image loads."""
    from PIL import Image
    write_class_folders(str(tmp_path / 'val'), CLASSES[:1], per_class=1,
                        hw=(64, 64))
    dataset = TinyImageNet(data_root=str(tmp_path), split='val',
                           pipeline=[dict(type='LoadImageFromFile')])
    assert dataset[0]['img'].shape == (64, 64, 3)
    path = dataset.get_data_info(0)['img_path']
    Image.new('RGB', (4096, 4096)).save(path)
    decoded = []
    monkeypatch.setattr(Image.Image, 'load', lambda *a: decoded.append(1))
    with pytest.raises(Image.DecompressionBombError,
                       match=f'{path} is 4096x4096 pixels, more '
                       'than the 65536 TinyImageNet allows'):
        dataset[0]
    assert decoded == []


@pytest.mark.parametrize('workers', [0, 1])
def test_the_pixel_bound_is_one_error_line_in_a_tool(tmp_path, workers,
                                                      capsys):
    """The refusal is PIL's own ``DecompressionBombError``, which the tools
    print as one ``error:`` line, also when a DataLoader worker raised it
    (torch re-raises it with the worker's traceback in its message)."""
    import torch
    from PIL import Image

    from tlalign_mm.checkpoint import one_line_errors
    write_class_folders(str(tmp_path / 'val'), CLASSES[:1], per_class=1,
                        hw=(64, 64))
    dataset = TinyImageNet(data_root=str(tmp_path), split='val',
                           pipeline=[dict(type='LoadImageFromFile')])
    path = dataset.get_data_info(0)['img_path']
    Image.new('RGB', (4096, 4096)).save(path)
    loader = torch.utils.data.DataLoader(dataset, num_workers=workers,
                                         collate_fn=list)
    with pytest.raises(SystemExit) as exit, one_line_errors():
        next(iter(loader))
    assert exit.value.code == 1
    assert capsys.readouterr().err.splitlines() == [
        f'error: {path} is 4096x4096 pixels, more than the 65536 TinyImageNet '
        'allows (its images are 64x64): refused before decoding']
