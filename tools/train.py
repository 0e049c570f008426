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
:func:`tlalign_mm.checkpoint.load`. A refused file ends the run with one
``error:`` line (``--debug`` shows the traceback).

Distributed training without CUDA: with ``--launcher pytorch`` on a machine
where CUDA is unavailable, the process group is initialised with ``gloo``
(a ``nccl`` backend in ``env_cfg.dist_cfg`` is switched to ``gloo`` with a
log line) and DDP wraps the CPU model without ``device_ids``. mmengine's
own ``init_dist`` would call ``torch.cuda.set_device`` and fail.
"""
import os.path as osp
import sys

# Make ``tlalign_mm`` importable when run from a checkout without install.
sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from tlalign_mm.apis import build_train_runner, parse_train_args  # noqa: E402
from tlalign_mm.checkpoint import run_tool  # noqa: E402


def main(argv=None):
    build_train_runner(parse_train_args(argv)).train()


if __name__ == '__main__':
    run_tool(main)  # a refused file: one line (--debug: the traceback)
