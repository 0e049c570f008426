# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""Test (and evaluate) a checkpoint with an mmpretrain, mmseg or mmdet config.

The config's ``default_scope`` (``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``)
selects the library; mmengine's :class:`~mmengine.runner.Runner` drives all
three. Follows mmpretrain 1.2.0's ``tools/test.py``; the library-specific
parts (``--out``, ``--show-dir``, ``--tta`` defaults) follow mmseg's and
mmdet's own test scripts. What it does is :mod:`tlalign_mm.apis.test`.

Examples::

    python tools/test.py CONFIG CHECKPOINT [--out results.pkl]
    bash tools/dist_test.sh CONFIG CHECKPOINT 8

The checkpoint is read by :func:`tlalign_mm.checkpoint.load` and loaded
strictly; a mistake in the config or a refused file ends the run with one
``error:`` line (``--debug`` shows the traceback). ``--launcher pytorch``
works without CUDA: see ``tools/train.py``.
"""
import importlib.util
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's tlalign_mm, installed or not


def load_cli():
    """:mod:`tlalign_mm.apis.cli` (standard library only), without running
    ``tlalign_mm/__init__`` (torch and OpenMMLab: seconds): ``--help`` and
    a wrong argument answer at once; what the tool does is imported after
    parsing."""
    name = 'tlalign_mm.apis.cli'
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, osp.join(ROOT, 'tlalign_mm', 'apis', 'cli.py'))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def main(argv=None):
    args = load_cli().parse_test_args(argv)
    from tlalign_mm.apis import build_test_runner, run_test
    return run_test(build_test_runner(args), args)


if __name__ == '__main__':
    load_cli().run_tool(main)  # a mistake: one line (--debug: traceback)
