"""TinyImageNet: the two splits must have the same class folders."""
import shutil

import pytest

from tlalign_mm.datasets import TinyImageNet
from tlalign_mm.datasets.synthetic import write_class_folders

CLASSES = ['n001', 'n002', 'n003', 'n004']


def _write(root):
    write_class_folders(str(root / 'train'), [f'{c}/images' for c in CLASSES],
                        per_class=1)
    write_class_folders(str(root / 'val'), CLASSES, per_class=1)


def test_labels_agree_between_the_splits(tmp_path):
    _write(tmp_path)
    train, val = (TinyImageNet(data_root=str(tmp_path), split=s,
                               serialize_data=False) for s in ('train', 'val'))
    assert train.CLASSES == val.CLASSES == tuple(CLASSES)
    assert sorted(val.get_gt_labels()) == [0, 1, 2, 3]


@pytest.mark.parametrize('split', ['val', 'train'])
def test_a_class_folder_missing_from_one_split_fails(tmp_path, split):
    """Hole 6: without val/n002, val mapped n003 to 1 while train mapped it
    to 2, silently."""
    _write(tmp_path)
    shutil.rmtree(tmp_path / split / 'n002')
    for built in ('train', 'val'):
        with pytest.raises(FileNotFoundError, match=r"lacks \['n002'\]|"
                           r"has extra \['n002'\]"):
            TinyImageNet(data_root=str(tmp_path), split=built)
