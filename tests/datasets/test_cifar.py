"""LocalCIFAR10/100 read the real "python version" files: labels that are
not class indices fail the build, a crafted file is refused naming it."""
import os.path as osp
import pathlib
import pickle
import tracemalloc

import pytest

from tlalign_mm.datasets import LocalCIFAR10, LocalCIFAR100
from tlalign_mm.datasets.synthetic import write_cifar


@pytest.mark.parametrize('cls, kind, name, key, labels', [
    (LocalCIFAR10, 'cifar10', 'cifar-10-batches-py/test_batch', 'labels',
     [10, -1, 3.7, True]),
    (LocalCIFAR100, 'cifar100', 'cifar-100-python/test', 'fine_labels',
     [100])])
def test_labels_out_of_range_or_not_integers_fail_the_build(
        tmp_path, cls, kind, name, key, labels):
    """Hole 9: 99 and -1 passed the build, 3.7 became 3. A class index
    (last) is read as it is."""
    path = pathlib.Path(write_cifar(str(tmp_path), kind), name)
    entry = pickle.loads(path.read_bytes())

    def build(label):
        entry[key][0] = label
        path.write_bytes(pickle.dumps(entry, protocol=2))
        return cls(data_root=str(tmp_path), split='test', verify_md5=False,
                   serialize_data=False)

    for label in labels:
        with pytest.raises(ValueError, match=r'are not class indices '
                           rf'\(integers in \[0, {labels[0]}\)\)'):
            build(label)
    assert build(1).get_gt_labels()[0] == 1


@pytest.mark.parametrize('data', [
    b'\x80\x02Nr\xff\xff\xff\x7f.',  # memo index 2**31 - 1, in 9 bytes
    b'\x80\x02Nr\x00\x00\x00\x01.',  # memo index 2**24
    b'\x80\x02}}X\x01\x00\x00\x00aK\x01sb.'],  # BUILD {'a': 1} on a dict
    ids=['memo-index-2**31', 'memo-index-2**24', 'build-on-dict'])
def test_a_crafted_batch_file_is_refused_naming_it(tmp_path, data):
    """Issue 30, case 8: nine bytes made the C unpickler allocate a memo
    array for index 2**31 - 1 (8 bytes an entry: MemoryError, or the
    memory), and a BUILD on a dict raised an AttributeError that did not
    name the file. The memo is a dict now: reading a file that names index
    2**24 takes far less than the 256 MB such an array would."""
    root = write_cifar(str(tmp_path), 'cifar10')
    path = osp.join(root, 'cifar-10-batches-py', 'test_batch')
    pathlib.Path(path).write_bytes(data)
    tracemalloc.start()
    with pytest.raises(pickle.UnpicklingError, match=f'{path} is not a '
                       'CIFAR "python version" file'):
        LocalCIFAR10(data_root=root, split='test', verify_md5=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**25
