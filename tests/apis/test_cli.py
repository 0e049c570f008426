"""The tools' command lines (:mod:`tlalign_mm.apis.cli`, issue 41): parsed
before torch and OpenMMLab are imported, every option described, and how a
tool ends: a mistake or an interrupt is one line, ``--debug`` the
traceback."""
import signal
import subprocess
import sys

import pytest

from tests.cli import ROOT
from tlalign_mm.apis import cli
from tlalign_mm.checkpoint.interrupt import TrainingInterrupted

TOOLS = ['train.py', 'test.py', 'smoke.py', 'export_backbone.py']
STACK = ('torch', 'mmengine', 'mmpretrain', 'tlalign_mm')


@pytest.mark.parametrize('tool', TOOLS)
def test_help_answers_before_the_stack_is_imported(tool):
    """``--help`` took 7-16 s a tool (it imported everything first); now the
    tool has parsed before anything of the stack is imported, and says
    what --debug does (every tool's refusals point to it)."""
    code = (
        'import runpy, sys\n'
        f'sys.argv = ["tools/{tool}", "--help"]\n'
        'try:\n'
        f'    runpy.run_path("tools/{tool}", run_name="__main__")\n'
        'except SystemExit as exit:\n'
        '    assert exit.code == 0, exit.code\n'
        f'print([m for m in {STACK!r} if m in sys.modules])\n')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, text=True,
                         capture_output=True, check=True).stdout
    assert out.splitlines()[-1] == '[]', out
    assert '--debug' in out


@pytest.mark.parametrize('parser', [cli.train_parser, cli.test_parser,
                                    cli.smoke_parser])
def test_every_option_says_what_it_does(parser):
    assert [a.option_strings for a in parser()._actions if not a.help] == []


def test_smoke_lists_and_checks_the_options_it_passes_on(capsys):
    """smoke's --help said 'Other options go to tools/train.py' without
    naming them, and a misspelt one failed in train.py's parser."""
    help_text = cli.smoke_parser().format_help()
    for option in ('--amp', '--cfg-options', '--resume', '--checkpoint'):
        assert option in help_text
    args, rest = cli.parse_smoke_args(
        ['c.py', '--size', '8', '--amp', '--cfg-options', 'a=1'])
    assert (args.config, args.size, rest) == (
        'c.py', 8, ['--amp', '--cfg-options', 'a=1'])
    for wrong in (['--cfg-optoins', 'a=1'], ['--size', '0']):
        with pytest.raises(SystemExit) as exit:
            cli.parse_smoke_args(['c.py', *wrong])
        assert exit.value.code == 2
    assert 'smoke.py: error:' in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match='--checkpoint gone.pth'):
        cli.parse_smoke_args(['c.py', '--checkpoint', 'gone.pth'])


def test_a_dict_in_cfg_options_is_refused_with_the_way_to_set_it(capsys):
    """mmengine's DictAction recursed until a RecursionError traceback."""
    with pytest.raises(SystemExit):
        cli.parse_train_args(['c.py', '--cfg-options',
                              "model.train_cfg.augments=[dict(type='X')]"])
    assert 'model.train_cfg.augments.0.type=CutMix' in \
        capsys.readouterr().err


def test_out_item_without_out_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.parse_test_args(['c.py', 'x.pth', '--out-item', 'metrics'])
    assert exit.value.code == 2
    assert 'give --out FILE' in capsys.readouterr().err


@pytest.mark.parametrize('argv, command', [
    (['c.py', '--work-dir', 'w'], 'c.py --work-dir w --resume'),
    (['c.py', '--resume'], 'c.py --resume'),
    (['c.py', '--resume', 'CKPT', '--amp'], 'c.py --amp --resume'),
    (['c.py', '--cfg-options', 'a=1 b'], "c.py --cfg-options 'a=1 b'"
     ' --resume')])
def test_the_resume_command_is_the_command_with_resume(argv, command,
                                                       tmp_path):
    argv = [str(tmp_path / a) if a == 'CKPT' else a for a in argv]
    (tmp_path / 'CKPT').touch()
    args = cli.parse_train_args(argv)
    assert cli.resume_command(args) == f'python tools/train.py {command}'


def _run(error, *argv, monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['tool.py', *argv])

    def main():
        raise error
    return cli.run_tool(main)


@pytest.mark.parametrize('error, status, line', [
    (cli.ConfigError('model: bad option'), 1, 'error: model: bad option'),
    (FileNotFoundError('gone.pth'), 1, 'error: gone.pth'),
    (KeyboardInterrupt(), 130, 'interrupted (Ctrl-C) where it was: nothing '
     'saved'),
    (TrainingInterrupted(signal.SIGTERM, 7, 'w/last.pth'), 143,
     'interrupted (SIGTERM) after iteration 7: its state is in w/last.pth; '
     'to resume: the same command with --resume')])
def test_a_tool_ends_with_one_line(error, status, line, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit:
        _run(error, monkeypatch=monkeypatch)
    assert exit.value.code == status
    assert capsys.readouterr().err == line + '\n'
    with pytest.raises(type(error)):  # --debug: the exception itself
        _run(error, '--debug', monkeypatch=monkeypatch)


def test_other_errors_keep_their_traceback(monkeypatch):
    with pytest.raises(RuntimeError):
        _run(RuntimeError('a bug'), monkeypatch=monkeypatch)
