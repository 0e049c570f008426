"""Which checkpoint auto-resume picks, atomic writes, the sampler skip."""
import os
import stat

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from tlalign_mm.checkpoint import (
    CheckpointError,
    atomic_write,
    find_resume_checkpoint,
)
from tlalign_mm.checkpoint.sampler import SkipSampler


def _ckpt(path, it, epoch=0):
    torch.save({'meta': {'iter': it, 'epoch': epoch},
                'state_dict': {'w': torch.full((2, ), float(it))}}, path)
    return str(path)


def test_last_checkpoint_is_resolved_inside(tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    _ckpt(work / 'last.pth', 8)
    (work / 'last_checkpoint').write_text('last.pth')
    assert find_resume_checkpoint(str(work)) == str(work / 'last.pth')
    # mmengine's CheckpointHook writes absolute paths; a copy of the work
    # dir resolves them to its own files
    (work / 'last_checkpoint').write_text('/elsewhere/work/last.pth')
    assert find_resume_checkpoint(str(work)) == str(work / 'last.pth')


@pytest.mark.parametrize('record', ['../other/last.pth', 'link/last.pth',
                                    'last.pth'])
def test_resume_never_leaves_the_work_dir(tmp_path, record):
    """``last_checkpoint`` naming ``../other/last.pth``, a path through a
    symlinked folder, or (issue 30, case 8) a name that is itself a
    symlink out of the work dir: auto-resume takes the work dir's own
    file; with none (case 5) it starts afresh rather than resume from the
    recorded path, and a link out is not a checkpoint of the work dir."""
    work, other = tmp_path / 'work', tmp_path / 'other'
    work.mkdir()
    other.mkdir()
    (work / 'link').symlink_to(other)
    _ckpt(other / 'last.pth', 69)
    (work / 'last_checkpoint').write_text(record)
    if record == 'last.pth':
        (work / 'last.pth').symlink_to(other / 'last.pth')
        with pytest.raises(CheckpointError, match='last.pth: it links to '
                           f'{os.path.realpath(other)}/last.pth, outside'):
            find_resume_checkpoint(str(work))
        os.remove(work / 'last.pth')
    else:
        assert find_resume_checkpoint(str(work)) is None  # nothing here
    own = _ckpt(work / 'last.pth', 50)
    assert find_resume_checkpoint(str(work)) == own
    os.remove(own)  # no file of that name here: the newest of the work dir
    epoch = _ckpt(work / 'epoch_1.pth', 10, 1)
    assert find_resume_checkpoint(str(work)) == epoch


def test_falls_back_to_the_newest_intact_checkpoint(tmp_path):
    _ckpt(tmp_path / 'epoch_1.pth', 3, 1)
    _ckpt(tmp_path / 'iter_6.pth', 6)
    latest = _ckpt(tmp_path / 'last.pth', 8)
    (tmp_path / 'last_checkpoint').write_text(latest)
    data = open(latest, 'rb').read()
    with open(latest, 'wb') as f:
        f.write(data[:len(data) // 2])
    (tmp_path / '.iter_9.pth.123.ab.partial').write_bytes(b'PK')
    assert find_resume_checkpoint(str(tmp_path)) == str(tmp_path /
                                                          'iter_6.pth')
    os.remove(tmp_path / 'last_checkpoint')  # no record: scan as well
    assert find_resume_checkpoint(str(tmp_path)) == str(tmp_path /
                                                          'iter_6.pth')


def test_no_checkpoint_starts_afresh_but_only_broken_ones_fail(tmp_path):
    assert find_resume_checkpoint(str(tmp_path)) is None
    (tmp_path / 'epoch_1.pth').write_bytes(b'')
    with pytest.raises(CheckpointError, match='none is intact') as error:
        find_resume_checkpoint(str(tmp_path))
    assert 'epoch_1.pth' in str(error.value) and 'empty' in str(error.value)


def test_atomic_write_replaces_whole_files_with_normal_permissions(tmp_path):
    path = tmp_path / 'a.pth'
    atomic_write(path, b'one')
    atomic_write(path, b'two')
    assert path.read_bytes() == b'two'
    assert os.listdir(tmp_path) == ['a.pth']  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask


def test_skip_sampler_skips_indices_then_runs_the_callback():
    loader = DataLoader(list(range(10)), batch_size=3,
                        sampler=SequentialSampler(range(10)))
    calls = []
    assert SkipSampler.install(loader, 2, lambda: calls.append(len(calls)))
    assert [b.tolist() for b in loader] == [[6, 7, 8], [9]]
    assert calls == [0]
    # later passes are the plain sampler's
    assert [b.tolist() for b in loader][0] == [0, 1, 2] and calls == [0]
    assert len(loader) == 4
    # a custom batch sampler: not touched
    custom = DataLoader(list(range(4)), batch_sampler=_Custom())
    assert not SkipSampler.install(custom, 1, print)


class _Custom(BatchSampler):

    def __init__(self):
        super().__init__(SequentialSampler(range(4)), 2, False)
