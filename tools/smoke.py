# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Try a config before launching it: two training iterations and one
validation step (a test config: one test step) on a tiny synthetic copy of
its dataset, printing every change made to make the run small
(:mod:`tlalign_mm.testing.smoke` says what it changes).

    python tools/smoke.py CONFIG [--size PX] [--work-dir DIR]
                          [--checkpoint FILE] [--cfg-options KEY=VALUE ...]

Any ``tools/train.py`` option is passed on (``--amp``, ``--cfg-options``,
...); the user's ``--cfg-options`` apply before smoke's changes. A
downstream config's pretrained checkpoint (``--checkpoint FILE``, or the
config's own file where it exists) is loaded strictly, as training would.
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
    args, rest = load_cli().parse_smoke_args(argv)
    from tlalign_mm.testing.smoke import smoke
    result = smoke(args.config, rest, args.size, args.work_dir,
                   args.checkpoint)
    steps = result['steps']
    losses = ', '.join(f'{x:.4g}' for x in result['losses'])
    done = f'{steps["test"]} test step' if steps['test'] else \
        f'{steps["train"]} iterations (loss {losses}), {steps["val"]} ' \
        'validation step'
    print(f'smoke: ok, {done}; metrics {result["metrics"]} (data and '
          f'logs: {result["work_dir"]})')


if __name__ == '__main__':
    load_cli().run_tool(main)
