"""tools/export_backbone.py: a tensors-only backbone file that loads with
``torch.load(weights_only=True)`` and torch's own allow-list (no
tlalign_mm, no mmengine), a check that a downstream config's backbone
loads it strictly, a timm state dict that timm loads strictly; it never
writes over its input, and says one line for a refused file (``--debug``:
the traceback), as tools/robustness/autoattack.py does. (That the config a
checkpoint records is never run: tests/test_checkpoint_safety.py, the
crafted ``config_code`` file on the ``export`` path.)"""
import json
import os
import re

import pytest
import timm
import torch

import tlalign_mm.downstream  # noqa: F401
from tests.cli import export_cli, run_script, tool_main
from tests.crafted_checkpoints import _Reduce
from tlalign_mm.checkpoint import CheckpointError, CheckpointMismatchError
from tlalign_mm.downstream.export import check_export, export_backbone

from .tiny import TINY_VIT, config_path, make_pretrain_checkpoint

PRETRAIN = config_path('tlalign', 'deit-small_4xb256-tlalign_in1k.py')
TIMM = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)
main = tool_main('export_backbone.py')


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


@pytest.fixture(scope='module')
def runner_checkpoint(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('pre') / 'epoch_300.pth')
    return path, make_pretrain_checkpoint(PRETRAIN, path).state_dict()


@pytest.mark.parametrize('to', ['mmpretrain', 'mmseg', 'mmdet'])
def test_export_is_tensors_and_plain_meta(tmp_path, runner_checkpoint, to):
    raw, state_dict = runner_checkpoint
    # the Runner checkpoint needs the allow-list (message_hub, numpy)
    assert 'mmengine.logging.history_buffer.HistoryBuffer' in \
        unsafe_globals_without_allow_list(raw)
    out = str(tmp_path / 'backbone.pth')
    meta = export_backbone(raw, out, to=to)
    assert unsafe_globals_without_allow_list(out) == []
    ckpt = torch.load(out, weights_only=True)
    assert set(ckpt) == {'meta', 'state_dict'}
    # plain JSON data: str keys, no tuples or objects
    assert ckpt['meta'] == meta == json.loads(json.dumps(meta))
    assert (meta['to'], meta['layout']) == (to, 'mmpretrain')
    assert (meta['epoch'], meta['iter']) == (300, 1200)
    assert meta['backbone']['type'] == 'VisionTransformer'
    assert meta['backbone']['arch'] == TINY_VIT
    want = {k: v for k, v in state_dict.items() if k.startswith('backbone.')}
    assert set(ckpt['state_dict']) == set(want)
    assert meta['num_tensors'] == len(want)
    for key, value in want.items():
        assert torch.equal(ckpt['state_dict'][key], value), key
    # a view's clone: the file holds the tensor, not the storage it views
    torch.save({'state_dict': {'backbone.w': torch.ones(8)[:2]}}, out)
    export_backbone(out, out + '.2')
    assert torch.load(out + '.2', weights_only=True)['state_dict'][
        'backbone.w'].untyped_storage().nbytes() == 2 * 4


def test_bad_prefix_target_or_check_fails_and_leaves_no_file(
        tmp_path, runner_checkpoint):
    raw, _ = runner_checkpoint
    out = str(tmp_path / 'backbone.pth')
    with pytest.raises(CheckpointMismatchError, match=r"'backbone\.'"):
        export_backbone(raw, out, prefix='encoder.')
    with pytest.raises(ValueError, match='--to'):
        export_backbone(raw, out, to='timm')
    # the tiny export does not fit the real DeiT-S config: the check says
    # so, naming the temporary file, before it becomes OUT
    real = config_path('transfer',
                       'deit-small_tlalign-in1k-pre_8xb96-1000e_cifar10.py')
    with pytest.raises(CheckpointMismatchError, match=(
            f"(?s)'{re.escape(str(tmp_path))}/.backbone.pth.[0-9]+@.*"
            r"\.partial'.* shape differs")):
        main([raw, out, '--check', real])
    assert os.listdir(tmp_path) == []
    export_backbone(raw, out)
    config = tmp_path / 'loose.py'
    config.write_text(
        "default_scope = 'mmpretrain'\n"
        'model = dict(type="ImageClassifier", backbone=dict('
        'type="VisionTransformer", arch="deit-tiny", init_cfg=dict('
        f'type="Pretrained", checkpoint={out!r}, prefix="backbone.")))\n')
    with pytest.raises(CheckpointMismatchError, match='not the strict loader'):
        check_export(out, str(config))


def test_timm_export_is_timms_model_with_the_classifiers_logits(
        tmp_path, capsys):
    """``--format timm`` of a ``PooledTIMMBackbone`` run (the real DeiT-S
    timm config, a tiny arch): ``timm.create_model`` loads it strictly and
    gives the classifier's logits (the same float32 ops in the same
    order: a few ulp of logits of order 1)."""
    ckpt, out = str(tmp_path / 'epoch_300.pth'), str(tmp_path / 'timm.pth')
    classifier = make_pretrain_checkpoint(
        config_path('tlalign', 'deit-small-timm_4xb256-tlalign_in1k.py'),
        ckpt, TIMM, width=TIMM['embed_dim']).eval()
    assert 'loads it with strict=True' in export_cli(
        [ckpt, out, '--format', 'timm'], capsys)
    model = timm.create_model('deit_small_patch16_224', num_classes=1000,
                              global_pool='token', **TIMM).eval()
    model.load_state_dict(torch.load(out, weights_only=True), strict=True)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(images), classifier(
            images, mode='tensor'), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('how', ['same', 'relative', 'symlink', 'hardlink'])
def test_refuses_to_overwrite_the_checkpoint(tmp_path, monkeypatch, capsys,
                                             how):
    ckpt = tmp_path / 'epoch_300.pth'
    torch.save({'state_dict': {'backbone.w': torch.ones(2)}}, ckpt)
    before, out = ckpt.read_bytes(), str(ckpt)
    if how == 'relative':
        monkeypatch.chdir(tmp_path)
        out = './epoch_300.pth'
    elif how != 'same':
        out = str(tmp_path / 'link.pth')
        (os.symlink if how == 'symlink' else os.link)(ckpt, out)
    with pytest.raises(SystemExit, match='^2$'):
        main([str(ckpt), out])
    message = capsys.readouterr().err
    assert 'is the input checkpoint' in message
    assert 'epoch_300_backbone.pth' in message
    assert ckpt.read_bytes() == before


@pytest.mark.parametrize('name, args', [
    ('export_backbone.py', ['{evil}', '{tmp}/out.pth']),
    # the hole of issue 30: the tool read the file without the safe loader
    ('robustness/autoattack.py', [config_path(
        'tlalign', 'deit-tiny_4xb256-tlalign_in1k.py'), '{evil}', '--eps', '0',
        '--work-dir', '{tmp}/work'])])
def test_a_refused_file_is_one_line_and_debug_shows_the_traceback(
        tmp_path, monkeypatch, capsys, name, args):
    """Whatever ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` says; nothing ran, and
    the tool wrote nothing."""
    evil, marker = tmp_path / 'evil.pth', tmp_path / 'MARK'
    torch.save({'meta': _Reduce(open, (str(marker), 'w'))}, evil)
    monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    argv = [a.format(evil=evil, tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit, match='^1$'):
        run_script(name, argv)
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(
        f"error: Refused checkpoint '{evil}': it pickles objects outside "
        'the weights-only allow-list (io.open)')
    assert sorted(os.listdir(tmp_path)) == ['evil.pth']
    with pytest.raises(CheckpointError, match='io.open'):
        run_script(name, argv + ['--debug'])


def _run_tool(argv, capsys):
    """tools/export_backbone.py as the command line runs it: its stderr
    (after exit status 1), or '' if it ran."""
    capsys.readouterr()
    try:
        run_script('export_backbone.py', argv)
    except SystemExit as exit:
        assert exit.code == 1
        err = capsys.readouterr().err  # after a logger's complaint about
        return err[err.find('error: '):]  # an earlier test's closed stream
    return ''


@pytest.mark.parametrize('timm_format', [False, True])
def test_out_is_replaced_atomically_never_written_through(
        tmp_path, monkeypatch, capsys, timm_format):
    """Issue 39, item 9, in both formats: OUT a symlink is replaced (the
    file it named is untouched), a write that fails leaves OUT as it was
    and no temporary file, OUT a directory is one ``error:`` line."""
    ckpt = str(tmp_path / 'epoch_300.pth')
    if timm_format:
        make_pretrain_checkpoint(config_path(
            'tlalign', 'deit-small-timm_4xb256-tlalign_in1k.py'), ckpt, TIMM,
            width=TIMM['embed_dim'])
    else:
        torch.save({'state_dict': {'backbone.w': torch.ones(2)}}, ckpt)
    args = ['--format', 'timm'] if timm_format else []
    victim, out = tmp_path / 'victim.txt', tmp_path / 'out.pth'
    victim.write_text('mine')
    out.symlink_to(victim)
    assert _run_tool([ckpt, str(out), *args], capsys) == ''
    assert victim.read_text() == 'mine' and not out.is_symlink()
    exported = out.read_bytes()

    def broken(obj, f):  # a kill or full disk half way through
        f.write(b'PK half')
        raise OSError('No space left on device')
    monkeypatch.setattr(torch, 'save', broken)
    with pytest.raises(OSError, match='No space'):
        _run_tool([ckpt, str(out), *args], capsys)
    assert out.read_bytes() == exported
    assert sorted(os.listdir(tmp_path)) == ['epoch_300.pth', 'out.pth',
                                            'victim.txt']
    (tmp_path / 'folder').mkdir()
    err = _run_tool([ckpt, str(tmp_path / 'folder'), *args], capsys)
    assert err == f'error: {tmp_path}/folder is a directory: give a file ' \
        'path\n'


def test_timm_export_refuses_what_is_not_timm_before_building_it(
        tmp_path, capsys):
    """Issue 39, items 7 and 9: a non-timm model, a timm backbone without
    a model_name: one ``error:`` line; a recorded config that sizes the
    model at 2 TB: its shapes are compared on the meta device (a real
    model would fail to allocate) and the export refused."""
    raw, out = str(tmp_path / 'pre.pth'), str(tmp_path / 'out.pth')
    make_pretrain_checkpoint(PRETRAIN, raw)
    err = _run_tool([raw, out, '--format', 'timm'], capsys)
    assert err.startswith('error: --format timm exports PooledTIMMBackbone '
                          'models') and "'VisionTransformer'" in err
    assert err.count('\n') == 1
    huge = str(tmp_path / 'huge.pth')
    tensors = {f'backbone.timm_model.{k}': v for k, v in timm.create_model(
        'deit_small_patch16_224', num_classes=0, **TIMM).state_dict().items()}
    for model_name, refusal in (
            ('', 'with model_name None: use --format mmpretrain'),
            ("model_name='deit_small_patch16_224', ", 'shape differs')):
        torch.save({'meta': {'cfg': (
            "model = dict(backbone=dict(type='PooledTIMMBackbone', "
            f"{model_name}img_size=1048576, patch_size=8, embed_dim=32, "
            'depth=2, num_heads=2))')}, 'state_dict': tensors}, huge)
        err = _run_tool([huge, out, '--format', 'timm'], capsys)
        assert err.startswith('error: ') and refusal in err
    with pytest.raises(CheckpointMismatchError, match=r'(?s)shape differs'
                       r'.*pos_embed \(1, 17, 32\) in the checkpoint, '
                       r'\(1, 17179869185, 32\) in the model'):
        main([huge, out, '--format', 'timm'])
    assert not os.path.exists(out)
