# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Try a config before launching it: two training iterations and one
validation step (a test config: one test step) on a tiny synthetic copy of
its dataset, printing every change made to make the run small
(:mod:`tlalign_mm.testing.smoke` says what it changes).

    python tools/smoke.py CONFIG [--size PX] [--work-dir DIR]
                          [--cfg-options KEY=VALUE ...]

Any ``tools/train.py`` option is passed on (``--amp``, ``--cfg-options``,
...); the user's ``--cfg-options`` apply before smoke's changes.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from tlalign_mm.checkpoint import run_tool  # noqa: E402
from tlalign_mm.testing.smoke import smoke  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Two training iterations and one validation step of a '
        'config on a tiny synthetic copy of its dataset',
        epilog='Other options go to tools/train.py (e.g. --cfg-options).')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--size', type=int, help='input size in px (default '
                        '32 classification, 64 segmentation, 128 detection)')
    parser.add_argument('--work-dir', help='where the data and logs go '
                        '(default: a new temporary folder)')
    args, rest = parser.parse_known_args(argv)
    result = smoke(args.config, rest, args.size, args.work_dir)
    steps = result['steps']
    losses = ', '.join(f'{x:.4g}' for x in result['losses'])
    done = f'{steps["test"]} test step' if steps['test'] else \
        f'{steps["train"]} iterations (loss {losses}), {steps["val"]} ' \
        'validation step'
    print(f'smoke: ok, {done}; metrics {result["metrics"]} (data and '
          f'logs: {result["work_dir"]})')


if __name__ == '__main__':
    run_tool(main)
