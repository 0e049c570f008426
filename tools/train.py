# Copyright (c) OpenMMLab and tlalign_mm contributors. All rights reserved.
"""Train a model from an mmpretrain, mmsegmentation or mmdetection config.

The config's ``default_scope`` (``'mmpretrain'``, ``'mmseg'`` or ``'mmdet'``)
selects the library; mmengine's :class:`~mmengine.runner.Runner` drives all
three. Follows mmpretrain 1.2.0's ``tools/train.py``; what it does is
:mod:`tlalign_mm.apis.train`.

Examples::

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp]
    bash tools/dist_train.sh CONFIG 8 [--amp]

``import tlalign_mm`` registers this package's modules;
:func:`tlalign_mm.checkpoint.install` then routes every checkpoint mmengine
loads (``--resume``, ``load_from``, ``Pretrained`` init, any scheme) through
:func:`tlalign_mm.checkpoint.load`. The config is checked before anything is
built (the model, the schedule, ``--amp``, the datasets' folders); a mistake
or a refused file ends the run with one ``error:`` line and nothing written
(``--debug`` shows the traceback). Ctrl-C or SIGTERM saves the iteration
under way to ``last.pth`` and prints the command that resumes it.

Distributed training without CUDA: with ``--launcher pytorch`` on a machine
where CUDA is unavailable, the process group is initialised with ``gloo``
(a ``nccl`` backend in ``env_cfg.dist_cfg`` is switched to ``gloo`` with a
log line) and DDP wraps the CPU model without ``device_ids``. mmengine's
own ``init_dist`` would call ``torch.cuda.set_device`` and fail.
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
    args = load_cli().parse_train_args(argv)
    from tlalign_mm.apis import run_train
    run_train(args)


if __name__ == '__main__':
    load_cli().run_tool(main)  # a mistake or Ctrl-C: one line (--debug)
