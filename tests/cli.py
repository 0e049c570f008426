"""The tools' command lines, run in this process (a Python start with all of
OpenMMLab's imports costs seconds): :func:`tool_main` is a script's
``main``, executed by ``runpy`` as the script file (the tools are not a
package, and nothing imports them). What the tools do is tested through
the package (:mod:`tlalign_mm.apis`, :mod:`tlalign_mm.testing`)."""
import os.path as osp
import runpy
import sys
from unittest import mock

from tlalign_mm.testing.configs import ROOT

__all__ = ['ROOT', 'export_cli', 'run_script', 'tool_main']


def tool_main(relpath: str):
    """The ``main`` of ``tools/<relpath>``."""
    return runpy.run_path(osp.join(ROOT, 'tools', relpath))['main']


def run_script(relpath: str, argv) -> None:
    """``python tools/<relpath> ARGV``, as ``__main__`` in this process."""
    path = osp.join(ROOT, 'tools', relpath)
    with mock.patch.object(sys, 'argv', [path, *map(str, argv)]):
        runpy.run_path(path, run_name='__main__')


def export_cli(argv, capsys) -> str:
    """``tools/export_backbone.py``'s main on ``argv``; returns what it
    printed."""
    main = tool_main('export_backbone.py')
    capsys.readouterr()
    main(argv)
    return capsys.readouterr().out
