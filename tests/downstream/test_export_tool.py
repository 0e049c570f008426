"""tools/export_backbone.py: refuses to write over its input, never runs
the config a checkpoint records, and says one line for a refused file."""
import os
import os.path as osp
import subprocess
import sys

import pytest
import torch

from tests.crafted_checkpoints import _Reduce
from tests.tool_scripts import ROOT, load_tool
from tlalign_mm.checkpoint import CheckpointMismatchError


@pytest.mark.parametrize('how', ['same', 'relative', 'symlink', 'hardlink'])
def test_refuses_to_overwrite_the_checkpoint(tmp_path, monkeypatch, capsys,
                                             how):
    ckpt = tmp_path / 'epoch_300.pth'
    torch.save({'state_dict': {'backbone.w': torch.ones(2)},
                'optimizer': {}}, ckpt)
    before = ckpt.read_bytes()
    out = str(ckpt)
    if how == 'relative':
        monkeypatch.chdir(tmp_path)
        out = './epoch_300.pth'
    elif how == 'symlink':
        out = str(tmp_path / 'link.pth')
        os.symlink(ckpt, out)
    elif how == 'hardlink':
        out = str(tmp_path / 'hard.pth')
        os.link(ckpt, out)
    with pytest.raises(SystemExit) as exit_info:
        load_tool('export_backbone.py').main([str(ckpt), out])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert 'is the input checkpoint' in message
    assert 'epoch_300_backbone.pth' in message
    assert ckpt.read_bytes() == before


@pytest.mark.parametrize('fmt', ['mmpretrain', 'timm'])
def test_the_recorded_config_is_never_executed(tmp_path, fmt):
    """Hole 2: ``meta['cfg']`` was run by ``Config.fromstring`` (the
    pretraining backbone record, and ``--format timm``'s model name). It is
    parsed now: the mmpretrain export skips a config that is not plain
    data; the timm export refuses it and asks for --config."""
    marker = tmp_path / 'MARK'
    ckpt = tmp_path / 'epoch_300.pth'
    torch.save({'state_dict': {'backbone.timm_model.w': torch.ones(2)},
                'meta': {'cfg': "model = dict(backbone=dict(type="
                         "'PooledTIMMBackbone', model_name='x'))\n"
                         f"_x = __import__('os').system('touch {marker}')\n"
                         }}, ckpt)
    main = load_tool('export_backbone.py').main
    out = str(tmp_path / 'out.pth')
    if fmt == 'timm':
        with pytest.raises(CheckpointMismatchError,
                           match='not a plain config.*--config'):
            main([str(ckpt), out, '--format', 'timm'])
    else:
        main([str(ckpt), out])
        assert torch.load(out, weights_only=True)['meta']['backbone'] is None
    assert not marker.exists()


@pytest.mark.e2e
def test_a_refused_file_is_one_line_and_debug_shows_the_traceback(tmp_path):
    """Hole 8: a refusal printed after a full traceback."""
    evil = tmp_path / 'evil.pth'
    torch.save({'meta': _Reduce(os.system, ('true', ))}, evil)
    cmd = [sys.executable, osp.join(ROOT, 'tools', 'export_backbone.py'),
           str(evil), str(tmp_path / 'out.pth')]
    env = dict(os.environ, PYTHONPATH=ROOT,
               TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD='1')
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: Refused checkpoint '{evil}': it "
                               'pickles objects outside the weights-only '
                               'allow-list (posix.system)')
    proc = subprocess.run(cmd + ['--debug'], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 1 and 'Traceback' in proc.stderr
