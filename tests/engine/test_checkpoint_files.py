"""Which checkpoint auto-resume picks, atomic writes and whose temporary
files are removed, the sampler skip."""
import os
import stat
import subprocess
import sys

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from tlalign_mm.checkpoint import (
    CheckpointError,
    atomic_write,
    find_resume_checkpoint,
)
from tlalign_mm.checkpoint.files import HOST, remove_partial_files
from tlalign_mm.checkpoint.sampler import SkipSampler

from ..cli import ROOT


def _ckpt(path, it, epoch=0):
    torch.save({'meta': dict(iter=it, epoch=epoch), 'state_dict': {}}, path)
    return str(path)


@pytest.mark.parametrize('record', ['../other/last.pth', 'link/last.pth',
                                    '/elsewhere/work/last.pth', 'last.pth'])
def test_resume_never_leaves_the_work_dir(tmp_path, record):
    """``last_checkpoint`` naming another folder's file (a copied work dir,
    a symlinked folder) or a symlink out: the work dir's own file of that
    name, else a fresh start; never the recorded path. (Else the newest
    of the work dir: the same branch as a broken recorded file, next
    test.)"""
    work, other = tmp_path / 'work', tmp_path / 'other'
    for folder in (work, other):
        folder.mkdir()
    (work / 'link').symlink_to(other)
    _ckpt(other / 'last.pth', 69)
    (work / 'last_checkpoint').write_text(record)
    if record == 'last.pth':
        (work / 'last.pth').symlink_to(other / 'last.pth')
        with pytest.raises(CheckpointError, match='last.pth: it links to '
                           f'{os.path.realpath(other)}/last.pth, outside'):
            find_resume_checkpoint(str(work))
        os.remove(work / 'last.pth')
    assert find_resume_checkpoint(str(work)) is None
    assert _ckpt(work / 'last.pth', 50) == find_resume_checkpoint(str(work))


def test_falls_back_to_the_newest_intact_checkpoint(tmp_path):
    """A truncated recorded file, or none recorded: the intact one that got
    furthest (temporary files of interrupted saves skipped); only broken
    ones: an error naming each; none: a fresh start."""
    assert find_resume_checkpoint(str(tmp_path)) is None
    _ckpt(tmp_path / 'epoch_1.pth', 3, 1)
    best = _ckpt(tmp_path / 'iter_6.pth', 6)
    latest = _ckpt(tmp_path / 'last.pth', 8)
    (tmp_path / '.iter_9.pth.1.ab.partial').write_bytes(b'PK')
    (tmp_path / 'last_checkpoint').write_text(latest)
    open(latest, 'r+b').truncate(500)
    assert find_resume_checkpoint(str(tmp_path)) == best
    os.remove(tmp_path / 'last_checkpoint')
    assert find_resume_checkpoint(str(tmp_path)) == best
    for path in (best, tmp_path / 'epoch_1.pth'):
        open(path, 'wb').close()
    with pytest.raises(CheckpointError, match=r'none is intact:\n.*'
                       'epoch_1.pth: .*not the zip archive'):
        find_resume_checkpoint(str(tmp_path))


def test_atomic_write_replaces_whole_files_with_normal_permissions(tmp_path):
    for data in (b'one', b'two'):
        atomic_write(tmp_path / 'a.pth', data)
    assert (tmp_path / 'a.pth').read_bytes() == b'two'
    assert os.listdir(tmp_path) == ['a.pth']  # no temporary file left
    os.umask(mask := os.umask(0))  # reads the umask
    assert stat.S_IMODE(os.stat(tmp_path / 'a.pth').st_mode) == 0o666 & ~mask


def test_a_second_tool_leaves_a_running_save_alone(tmp_path):
    """Issue 39, item 2: a process writing the work dir's checkpoint (held
    between its write and its rename) keeps its temporary file while
    another tool starts on the same work dir (``CheckpointSafetyHook.
    before_run`` removes partial files), and its save completes."""
    out = tmp_path / 'epoch_1.pth'
    writer = subprocess.Popen(
        [sys.executable, '-c', 'import sys; from tlalign_mm.checkpoint '
         'import atomic_write; atomic_write(sys.argv[1], lambda f: (f.write('
         "b'saved'), print('written', flush=True), sys.stdin.readline()))",
         str(out)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline() == 'written\n'
    assert remove_partial_files(str(tmp_path)) == []
    writer.communicate('go\n', timeout=60)
    assert writer.returncode == 0 and out.read_bytes() == b'saved'
    assert os.listdir(tmp_path) == ['epoch_1.pth']


def test_only_partial_files_of_a_gone_writer_are_removed(tmp_path):
    """That of a process of this host that has ended goes; a running
    one's, another host's, a user's ``.notes.partial``, a directory or a
    link of the name stay."""
    gone = subprocess.run([sys.executable, '-c', 'import os; '
                           'print(os.getpid())'], capture_output=True,
                          text=True).stdout.strip()
    name = '.last.pth.{}@{}.0123abcd.partial'.format
    files = [name(gone, HOST), name(os.getpid(), HOST),
             name(gone, 'other-host.example'), '.notes.partial']
    for file in files:
        (tmp_path / file).write_bytes(b'x')
    (tmp_path / name(gone, HOST).replace('last', 'dir')).mkdir()
    os.symlink(tmp_path / '.notes.partial',
               tmp_path / name(gone, HOST).replace('last', 'link'))
    assert remove_partial_files(str(tmp_path)) == [
        str(tmp_path / name(gone, HOST))]
    assert sorted(os.listdir(tmp_path)) == sorted(files[1:] + [
        name(gone, HOST).replace('last', w) for w in ('dir', 'link')])


def test_skip_sampler_skips_indices_then_runs_the_callback():
    loader = DataLoader(list(range(10)), batch_size=3,
                        sampler=SequentialSampler(range(10)))
    calls = []
    assert SkipSampler.install(loader, 2, lambda: calls.append(len(calls)))
    assert [b.tolist() for b in loader] == [[6, 7, 8], [9]] and calls == [0]
    assert [b.tolist() for b in loader][0] == [0, 1, 2] and calls == [0]
    custom = DataLoader(list(range(4)), batch_sampler=type(
        'Custom', (BatchSampler, ), {})(SequentialSampler(range(4)), 2, False))
    assert not SkipSampler.install(custom, 1, print)  # not touched
