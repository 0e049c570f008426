"""tools/export_backbone.py refuses to write over its input."""
import importlib.util
import os
import os.path as osp

import pytest
import torch

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _tool():
    spec = importlib.util.spec_from_file_location(
        'export_backbone_tool', osp.join(ROOT, 'tools', 'export_backbone.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        _tool().main([str(ckpt), out])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err
    assert 'is the input checkpoint' in message
    assert 'epoch_300_backbone.pth' in message
    assert ckpt.read_bytes() == before
