"""``tlalign_mm.checkpoint.load`` and every path that reaches it: hostile
files (``tests/crafted_checkpoints.py``) refused with one message naming
them, or reduced to what a checkpoint holds."""
import importlib
import json
import os
import subprocess
import sys

import pytest
import torch
from mmengine.runner import load_checkpoint

from tlalign_mm.checkpoint import CheckpointError, install, load, parse_config

from . import crafted_checkpoints as crafted
from .cli import ROOT

install()  # what the tools do
load_module = importlib.import_module('tlalign_mm.checkpoint.load')


@pytest.fixture(scope='module')
def report(tmp_path_factory):
    """:mod:`tests.crafted_checkpoints`' records by (path, file), and its
    import checks."""
    proc = subprocess.run(
        [sys.executable, '-m', 'tests.crafted_checkpoints', str(
            tmp_path_factory.mktemp('crafted'))], cwd=ROOT, env=dict(
                os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1',
                TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD='1'),
        capture_output=True, text=True, timeout=900)
    lines = [json.loads(line[7:]) for line in proc.stdout.splitlines()
             if line.startswith('RESULT ')]
    assert proc.returncode == 0 and lines[-1] == {'done': True}, (
        f'ended with {proc.returncode} at {lines[-1:]}: {proc.stderr[-3000:]}')
    return {k: v for r in lines for k, v in ({(r.pop('path'), r.pop(
        'file')): r} if 'file' in r else r).items()}


LOADERS = ('mmengine', 'open-mmlab', 'pretrained', 'mmengine-pretrained')
PATHS = ('build_model', *LOADERS, 'mmseg-inferencer', 'mmdet-inferencer',
         'timm-backbone', 'export', 'label_maps')


@pytest.mark.e2e
@pytest.mark.parametrize('path', PATHS + ('runner', ))
def test_crafted_files_on_every_path(report, path):
    """Each crafted file is refused naming it (a tool: one ``error:`` line)
    or loads without what no checkpoint holds (then it does not fit the
    tools' models, and the inferencers find no config text to run); no
    payload ran, no HistoryBuffer changed. Resumed by mmengine's Runner: no
    victim deleted, auto-resume never leaves the work dir. ``import
    tlalign_mm`` changed nothing; the opt-in line installs."""
    assert report['import changes nothing'] and report['the line installs']
    for run, expected in crafted.RUNS.items() if path == 'runner' else ():
        r = report[path, run]
        assert expected in r['outcome'] and r['victim_intact'], r
    for name, (_, refusal) in crafted.files('').items() if path in PATHS \
            else ():
        result = report[path, f'{name}.pth']
        outcome = result['outcome']
        assert not result['payload_ran'] and result['statistics_intact']
        if path in ('export', 'label_maps'):
            assert outcome == 'ran' or outcome.startswith('error: '), result
        if refusal is None:
            assert outcome == 'loaded' or path not in LOADERS, result
            assert 'inferencer' not in path or 'refused' in outcome, result
        else:
            assert "Refused checkpoint '" in outcome and name in outcome \
                and refusal in outcome and '\n' not in outcome, result


def test_config_text_and_paths_never_come_back(tmp_path):
    """Config text comes back as the data it assigns or not at all
    (``meta['config']``, the hub's ``cfg``); the hub's paths (``best_ckpt``:
    ``save_best`` deletes it) and values of the wrong kind are dropped."""
    code = "__import__('os').system('touch MARK')\n"
    info = dict(cfg=code, best_ckpt='/victim', best_ckpt_top1='/v', iter=3,
                last_ckpt='/etc/passwd', keep_ckpt_ids=['../x'],
                best_score=-1.0, eta='soon')
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': dict(
        epoch=0, iter=0, config=code, cfg="model = dict(type='X', n=(1, -2.5)"
        ", d={'k': [None, True]})\nx = f(1)\nimport os\ny = dict(**z)\n"),
        'message_hub': dict(runtime_info=info)}, tmp_path / 'x.pth')
    got = load(tmp_path / 'x.pth')
    assert got['meta'] == dict(epoch=0, iter=0, cfg=dict(model=dict(
        type='X', n=(1, -2.5), d={'k': [None, True]})))
    assert got['message_hub'] == dict(log_scalars={}, resumed_keys={},
                                      runtime_info=dict(best_score=-1.0,
                                                        iter=3))
    assert parse_config(code) == parse_config('not python (') == {}


def test_other_schemes_and_missing_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="'s3://b/x.pth'.*local path"):
        load_checkpoint(torch.nn.Linear(2, 2), 's3://b/x.pth')
    with pytest.raises(FileNotFoundError, match='nothing.pth'):
        load(tmp_path / 'nothing.pth')


def test_a_runner_checkpoint_loads_without_a_warning(tmp_path, monkeypatch):
    """What every Runner checkpoint holds that is left out on purpose (the
    hub's config text, ``last_ckpt``, ``best_ckpt``) goes without a
    warning, and without the resumed key mmengine would warn of."""
    from mmengine.logging import MessageHub

    from tlalign_mm.checkpoint.plain import plain_checkpoint
    hub = MessageHub.get_instance('own-checkpoint')
    hub.update_scalar('train/loss', 1.5)
    for key, value in dict(cfg='x = 1', last_ckpt='/w/epoch_1.pth',
                           best_ckpt='/w/best.pth', epoch=1).items():
        hub.update_info(key, value, resumed=True)
    ckpt = dict(meta=dict(epoch=1, iter=3, cfg="model = dict(type='X')"),
                state_dict={'w': torch.ones(1)}, message_hub=hub.state_dict())
    plain_checkpoint(ckpt)
    torch.save(ckpt, tmp_path / 'epoch_1.pth')
    logged = []
    monkeypatch.setattr(load_module, 'print_log',
                        lambda *args, **kwargs: logged.append(args))
    got = load(tmp_path / 'epoch_1.pth')['message_hub']
    assert logged == [] and got['runtime_info'] == dict(epoch=1)
    assert got['resumed_keys'] == {'train/loss': True, 'epoch': True}
    assert got['log_scalars']['train/loss'].mean() == 1.5


def test_what_the_unpickler_builds_is_bounded(tmp_path, monkeypatch):
    """Counted in the pickle's opcodes before ``torch.load`` runs (the
    crafted files: hash keys, views of shared storage, long config text)."""
    torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': dict(
        x=[[]] * 30)}, tmp_path / 'x.pth')
    load(tmp_path / 'x.pth')
    monkeypatch.setattr(load_module, 'MAX_OBJECTS', 25)
    with pytest.raises(CheckpointError, match='it builds more than 25 '
                       'objects'):
        load(tmp_path / 'x.pth')


def test_config_text_is_parsed_only_when_short(tmp_path):
    """At most ``MAX_CONFIG_CHARS`` characters go to ``ast.parse`` (4 MB of
    text took 2 GB there); an int wider than 64 bits is left out (a
    5,000-digit literal broke the export's JSON)."""
    path, pad = tmp_path / 'x.pth', load_module.MAX_CONFIG_CHARS
    for cfg, want in (
            ("model = dict(type='X', depth=0x" + 'f' * 5000 + ')\n',
             dict(model=dict(type='X'))),
            ('x = 1\n' + '#' * (pad - 6), dict(x=1)),
            ('x = 1\n' + '#' * (pad - 5), None)):
        torch.save({'state_dict': {'w': torch.ones(1)}, 'meta': dict(
            cfg=cfg)}, path)
        assert load(path)['meta'].get('cfg') == want
