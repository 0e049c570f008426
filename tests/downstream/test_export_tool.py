"""tools/export_backbone.py refuses to write over its input."""
import os

import pytest
import torch

from tests.tool_scripts import load_tool


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
