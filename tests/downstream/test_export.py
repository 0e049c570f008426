"""tools/export_backbone.py: a tensors-only backbone file that loads with
``torch.load(weights_only=True)`` without tlalign_mm, and a check that a
downstream config's backbone loads it strictly."""
import os
import re
import subprocess
import sys

import pytest
import torch

import tlalign_mm.downstream  # noqa: F401
from tests.tool_scripts import load_tool
from tlalign_mm.checkpoint import CheckpointMismatchError, load
from tlalign_mm.downstream.export import check_export, export_backbone

from .tiny import TINY_VIT, config_path, make_pretrain_checkpoint

PRETRAIN = config_path('tlalign', 'deit-small_4xb256-tlalign_in1k.py')
PLAIN = (str, int, float, bool, type(None))


def unsafe_globals_without_allow_list(path: str) -> list:
    """The globals ``torch.load(path, weights_only=True)`` would refuse
    with torch's own allow-list only."""
    saved = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    try:
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(
            path))
    finally:
        torch.serialization.add_safe_globals(saved)


def plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return isinstance(value, PLAIN)


@pytest.fixture(scope='module')
def runner_checkpoint(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('pre') / 'epoch_300.pth')
    return path, make_pretrain_checkpoint(PRETRAIN, path, TINY_VIT, 32)


@pytest.mark.parametrize('to', ['mmpretrain', 'mmseg', 'mmdet'])
def test_export_is_tensors_and_plain_meta(tmp_path, runner_checkpoint, to):
    raw, state_dict = runner_checkpoint
    # the Runner checkpoint needs the allow-list (message_hub, numpy)
    assert 'mmengine.logging.history_buffer.HistoryBuffer' in \
        unsafe_globals_without_allow_list(raw)
    out = str(tmp_path / 'backbone.pth')
    meta = export_backbone(raw, out, to=to)
    assert unsafe_globals_without_allow_list(out) == []
    # the allow-list is back in place
    assert load(raw)['meta']['epoch'] == 300
    ckpt = torch.load(out, weights_only=True)
    assert set(ckpt) == {'meta', 'state_dict'}
    assert ckpt['meta'] == meta and plain(meta)
    assert meta['to'] == to and meta['layout'] == 'mmpretrain'
    assert (meta['epoch'], meta['iter']) == (300, 1200)
    assert meta['backbone']['type'] == 'VisionTransformer'
    assert meta['backbone']['arch'] == TINY_VIT
    want = {k: v for k, v in state_dict.items() if k.startswith('backbone.')}
    assert set(ckpt['state_dict']) == set(want)
    for key, value in want.items():
        got = ckpt['state_dict'][key]
        assert torch.equal(got, value), key
        # a clone: the file holds no larger storage than the tensor
        assert got.untyped_storage().nbytes() == got.numel() * \
            got.element_size()
    assert meta['num_tensors'] == len(want)


@pytest.mark.e2e
def test_export_loads_without_tlalign_mm(tmp_path, runner_checkpoint):
    """In a bare Python with torch only, the export loads with
    weights_only=True; the Runner checkpoint it came from does not."""
    raw, _ = runner_checkpoint
    out = str(tmp_path / 'backbone.pth')
    export_backbone(raw, out)
    code = '''
import pickle, sys, torch
c = torch.load(sys.argv[1], weights_only=True)
print(len(c['state_dict']))
try:
    torch.load(sys.argv[2], weights_only=True)
except pickle.UnpicklingError:
    print('raw refused')
assert 'tlalign_mm' not in sys.modules and 'mmengine' not in sys.modules
'''
    proc = subprocess.run([sys.executable, '-c', code, out, raw],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, refused = proc.stdout.split('\n')[:2]
    assert int(count) > 0 and refused == 'raw refused'


def test_export_wrong_prefix_or_target(tmp_path, runner_checkpoint):
    raw, _ = runner_checkpoint
    with pytest.raises(CheckpointMismatchError, match=r"'backbone\.'"):
        export_backbone(raw, str(tmp_path / 'x.pth'), prefix='encoder.')
    with pytest.raises(ValueError, match='--to'):
        export_backbone(raw, str(tmp_path / 'x.pth'), to='timm')


def test_a_failed_check_leaves_no_file(tmp_path, runner_checkpoint):
    """The tiny export does not fit the real DeiT-S transfer config: the
    check says so before any training starts, naming OUT, and (issue 33)
    leaves no OUT behind: the export is checked (as OUT.<pid>.partial)
    before it becomes OUT."""
    raw, _ = runner_checkpoint
    out = str(tmp_path / 'backbone.pth')
    real = config_path('transfer',
                       'deit-small_tlalign-in1k-pre_8xb96-1000e_cifar10.py')
    main = load_tool('export_backbone.py').main
    with pytest.raises(CheckpointMismatchError,
                       match=f"(?s)'{re.escape(out)}.[0-9]+.partial'.* "
                       'shape differs'):
        main([raw, out, '--check', real])
    assert os.listdir(tmp_path) == []


def test_check_needs_the_strict_loader(tmp_path, runner_checkpoint):
    raw, _ = runner_checkpoint
    out = str(tmp_path / 'backbone.pth')
    export_backbone(raw, out)
    config = tmp_path / 'loose.py'
    config.write_text(
        "default_scope = 'mmpretrain'\n"
        'model = dict(type="ImageClassifier", backbone=dict('
        'type="VisionTransformer", arch="deit-tiny", init_cfg=dict('
        f'type="Pretrained", checkpoint={out!r}, prefix="backbone.")))\n')
    with pytest.raises(CheckpointMismatchError, match='not the strict loader'):
        check_export(out, str(config))
