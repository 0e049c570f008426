# Copyright (c) tlalign_mm contributors. All rights reserved.
"""The command lines of ``tools/train.py``, ``tools/test.py`` and
``tools/smoke.py``, and how every tool ends (:func:`run_tool`).

Standard library only: a tool loads this module by its path
(:func:`load_cli` in the tool) before anything else, so ``--help`` and a
wrong argument answer without importing torch and OpenMMLab (seconds);
what the tool does is imported after its arguments are parsed (mmengine's
``DictAction`` when ``--cfg-options`` is given).

A mistake is one line: :class:`ConfigError` (a configuration found wrong
before anything is built), a missing file, a refused checkpoint and an
interrupted run each end the tool with one line on stderr, without a
traceback; ``--debug`` (or ``TLALIGN_DEBUG=1``) shows the traceback.
"""
import argparse
import os
import os.path as osp
import shlex
import sys
from typing import Optional, Sequence

DEBUG_HELP = ('A refused config, checkpoint or dataset ends with one "error:" '
              'line; --debug (or TLALIGN_DEBUG=1) shows the traceback '
              'instead.')
CFG_OPTIONS_HELP = ('override config settings, key=value (lists: '
                    'key="[a,b]" or key=a,b; no white space)')
LAUNCHERS = ['none', 'pytorch', 'slurm', 'mpi']


class ConfigError(ValueError):
    """A configuration mistake found before anything is built (a model the
    config cannot build, a schedule shorter than its warm-up, mixed
    precision without a GPU, ...). The tools print it as one ``error:``
    line, plus at most a few lines of fix, and exit with status 1."""


#: what building a config's model or hooks raises for a config it refuses
#: (an unknown type: KeyError; a bad argument or option: TypeError,
#: ValueError; an unsupported case: NotImplementedError; mmpretrain's
#: ``assert arch in arch_zoo``: AssertionError)
REFUSALS = (KeyError, TypeError, ValueError, NotImplementedError,
            AssertionError)


def refusal(error: BaseException) -> str:
    """A refusal's text (a KeyError's without the quotes repr adds)."""
    if isinstance(error, KeyError) and len(error.args) == 1:
        return str(error.args[0])
    return str(error) or type(error).__name__


class CfgOptions(argparse.Action):
    """mmengine's ``DictAction`` (``--cfg-options key=value ...``),
    imported when the option is given, not when ``--help`` is asked."""

    def __call__(self, parser, namespace, values, option_string=None):
        from mmengine.config import DictAction
        # DictAction reads no dict: dict(a=1) became a string, or (with a
        # comma) recursed until a RecursionError
        if any('dict(' in value for value in values):
            parser.error(
                f'{option_string}: cannot read {" ".join(values)}: values '
                'are numbers, strings, True/False/None and lists ("[a,b]"); '
                'set a dict in a list key by key, e.g. '
                'model.train_cfg.augments.0.type=CutMix')
        DictAction(self.option_strings, self.dest, nargs=self.nargs)(
            parser, namespace, values, option_string)


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not an integer')
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


# --- tools/train.py -------------------------------------------------------

TRAIN_EPILOG = '''\
Ctrl-C or SIGTERM (one process) finishes the iteration under way, saves its
state to WORK_DIR/last.pth and prints the command that resumes it; a second
Ctrl-C stops at once. last.pth is also saved every 10 minutes (a config's
last_checkpoint_hook = dict(interval=ITERS, minutes=M) changes it), so a
killed run loses minutes. The config is checked before anything is built:
the model, the schedule, --amp, the datasets' folders. ''' + DEBUG_HELP


def add_train_options(parser, work_dir: bool = True) -> None:
    """``tools/train.py``'s options (not its config) on ``parser`` (a
    parser or an argument group)."""
    if work_dir:
        parser.add_argument('--work-dir', help='the dir to save logs and '
                            'models (default: work_dirs/CONFIG_NAME)')
    parser.add_argument(
        '--resume', nargs='?', type=str, const='auto', metavar='CKPT',
        help='resume from CKPT; without a path, from the newest intact '
        'checkpoint of the work dir (none there: it starts afresh)')
    parser.add_argument('--amp', action='store_true',
                        help='automatic-mixed-precision training (needs a '
                        'GPU)')
    parser.add_argument('--no-validate', action='store_true',
                        help='do not evaluate checkpoints during training')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help="scale the learning rate by the batch size "
                        "(the config's auto_scale_lr.base_batch_size)")
    parser.add_argument('--no-pin-memory', action='store_true',
                        help='do not pin host memory for the dataloaders')
    parser.add_argument('--no-persistent-workers', action='store_true',
                        help='end the dataloader workers after every epoch '
                        '(default: kept alive when num_workers > 0)')
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptions,
                        help=CFG_OPTIONS_HELP)
    parser.add_argument('--launcher', default='none', choices=LAUNCHERS,
                        help='job launcher (dist_train.sh: pytorch)')
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help='set by torch.distributed launchers')


def train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='train.py', epilog=TRAIN_EPILOG,
        description='Train a model from an mmpretrain, mmseg or mmdet '
        'config.')
    parser.add_argument('config', help='train config file path')
    add_train_options(parser)
    return parser


def parse_train_args(argv: Optional[Sequence[str]] = None):
    """``tools/train.py``'s arguments (``argv``; default ``sys.argv``), with
    a missing ``--resume`` file named now. ``args.argv`` keeps them (the
    command that resumes an interrupted run)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = train_parser().parse_args(argv)
    args.argv = argv
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.resume not in (None, 'auto') and '://' not in args.resume and \
            not osp.isfile(args.resume):
        raise FileNotFoundError(
            f'--resume {args.resume}: no such checkpoint file (--resume '
            'without a path picks the newest intact one of the work dir)')
    return args


def resume_command(args) -> str:
    """The ``tools/train.py`` command that resumes the run of ``args`` from
    the newest checkpoint of its work dir: the same, with ``--resume``."""
    argv, rest = [], list(getattr(args, 'argv', None) or [args.config])
    while rest:
        token = rest.pop(0)
        if token == '--resume':
            if rest and rest[0] == args.resume:  # its CKPT
                rest.pop(0)
        elif not token.startswith('--resume='):
            argv.append(token)
    return shlex.join(['python', 'tools/train.py', *argv, '--resume'])


# --- tools/test.py --------------------------------------------------------

def test_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='test.py',
        description='Test (and evaluate) a checkpoint with an mmpretrain, '
        'mmseg or mmdet config. The checkpoint is loaded strictly (every '
        'key must fit; --cfg-options strict_load=False loads what fits).',
        epilog=DEBUG_HELP)
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where the metrics file goes '
                        '(default: work_dirs/CONFIG_NAME)')
    parser.add_argument('--out', help='results file (mmdet: .pkl; mmseg: a '
                        'directory for the predicted maps)')
    parser.add_argument('--out-item', choices=['metrics', 'pred'],
                        help='what --out holds (default: predictions)')
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptions,
                        help=CFG_OPTIONS_HELP)
    parser.add_argument('--amp', action='store_true',
                        help='automatic-mixed-precision test')
    parser.add_argument('--show-dir', help='where visualizations go')
    parser.add_argument('--show', action='store_true',
                        help='show predictions in a window')
    parser.add_argument('--interval', type=positive_int, default=1,
                        help='visualize every N samples')
    parser.add_argument('--wait-time', type=float, default=2,
                        help='seconds each window is shown')
    parser.add_argument('--no-pin-memory', action='store_true',
                        help='do not pin host memory for the dataloader')
    parser.add_argument('--tta', action='store_true', help='test-time '
                        "augmentation: the config's tta_model/tta_pipeline, "
                        'else flips (mmpretrain, mmdet)')
    parser.add_argument('--launcher', default='none', choices=LAUNCHERS,
                        help='job launcher (dist_test.sh: pytorch)')
    # torch.distributed.launch passes --local-rank (torch >= 2.0)
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0,
                        help='set by torch.distributed launchers')
    return parser


def parse_test_args(argv: Optional[Sequence[str]] = None):
    """``tools/test.py``'s arguments (``argv``; default ``sys.argv``)."""
    parser = test_parser()
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if args.out is None and args.out_item is not None:
        parser.error('--out-item says what --out holds: give --out FILE')
    return args


# --- tools/smoke.py -------------------------------------------------------

def _smoke_own_options(parser) -> None:
    parser.add_argument('config', help='config file path')
    parser.add_argument('--size', type=positive_int, help='input size in px '
                        '(default 32 classification, 64 segmentation, 128 '
                        'detection)')
    parser.add_argument('--work-dir', help='where the data and logs go '
                        '(default: a new temporary folder)')
    parser.add_argument(
        '--checkpoint', metavar='FILE',
        help="the downstream model's pretrained checkpoint, loaded strictly "
        "as training would (default: the config's own Pretrained file if it "
        'exists; none: the model starts from its own initialisation)')


def smoke_parser() -> argparse.ArgumentParser:
    """smoke's options and, for ``--help`` and checking, those it passes on
    to ``tools/train.py``."""
    parser = argparse.ArgumentParser(
        prog='smoke.py',
        description='Two training iterations and one validation step of a '
        'config (a test config: one test step) on a tiny synthetic copy of '
        'its dataset; it prints every change made to make the run small.',
        epilog=DEBUG_HELP)
    _smoke_own_options(parser)
    add_train_options(parser.add_argument_group(
        'tools/train.py options (passed on; --cfg-options apply before '
        "smoke's changes)"), work_dir=False)
    return parser


def parse_smoke_args(argv: Optional[Sequence[str]] = None):
    """smoke's own arguments, and the rest (``tools/train.py`` options,
    checked here) as a list."""
    argv = list(sys.argv[1:] if argv is None else argv)
    smoke_parser().parse_args(argv)  # --help, and every option checked
    own = argparse.ArgumentParser(prog='smoke.py', add_help=False)
    _smoke_own_options(own)
    args, rest = own.parse_known_args(argv)
    if args.checkpoint is not None and not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'--checkpoint {args.checkpoint}: no such '
                                'file')
    return args, rest


# --- how a tool ends ------------------------------------------------------

def run_tool(main, *args, **kwargs):
    """Call ``main``; a :class:`ConfigError`, a missing file, a refused
    checkpoint or data file (:func:`tlalign_mm.checkpoint.one_line_errors`)
    ends the process with status 1 and one ``error:`` line on stderr, an
    interrupt with one line (status 130 for SIGINT, 143 for SIGTERM).
    ``--debug`` on the command line (removed before ``main`` parses it) or
    ``TLALIGN_DEBUG=1``: the traceback."""
    debug = '--debug' in sys.argv or os.environ.get('TLALIGN_DEBUG') == '1'
    sys.argv = [a for a in sys.argv if a != '--debug']
    try:
        return main(*args, **kwargs)
    except KeyboardInterrupt as error:
        if debug:
            raise
        # TrainingInterrupted says where the state went and how to resume
        print(str(error) or 'interrupted (Ctrl-C) where it was: nothing '
              'saved', file=sys.stderr)
        raise SystemExit(getattr(error, 'status', 130)) from None
    except (ConfigError, FileNotFoundError) as error:
        if debug:
            raise
        print(f'error: {error}', file=sys.stderr)
        raise SystemExit(1) from None
    except Exception:
        checkpoint = sys.modules.get('tlalign_mm.checkpoint')
        if checkpoint is None:  # nothing of it ran: not a refused file
            raise
        with checkpoint.one_line_errors(debug):
            raise
