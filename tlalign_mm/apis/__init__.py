"""What the tools share, as mmpretrain keeps it in ``mmpretrain.apis``: the
command lines and how a tool ends (:mod:`.cli`, standard library only: the
tools load it first), the training and test runner set-up of
``tools/train.py`` and ``tools/test.py`` (:mod:`.train`, :mod:`.test`) and
the main job of ``tools/run_demo.py`` (:mod:`.demo`). The tools are thin
command lines over these."""
from . import cli  # noqa: F401  (bound here when a tool loaded it first)
from .cli import ConfigError, run_tool
from .test import (
    build_test_runner,
    check_test_config,
    merge_test_args,
    parse_test_args,
    run_test,
)
from .train import (
    build_runner,
    build_train_runner,
    check_train_config,
    merge_train_args,
    parse_train_args,
    run_train,
    train_parser,
)

__all__ = [
    'ConfigError', 'build_runner', 'build_test_runner', 'build_train_runner',
    'check_test_config', 'check_train_config', 'merge_test_args',
    'merge_train_args', 'parse_test_args', 'parse_train_args', 'run_test',
    'run_tool', 'run_train', 'train_parser'
]
