"""Training-step time and memory of TL-Align against plain CutMix.

Settings share one model's weights and one batch and are timed in
interleaved repetitions, so machine noise hits all alike
(:mod:`tlalign_mm.testing.steps`: ``cutmix``, ``tlalign``, ``dense``, and
with ``--compile`` also ``cutmix+compile`` and ``tlalign+compile``: the
model's forward and loss under ``torch.compile``, backward and optimizer
step eager, drop-path rates as Python floats).

With ``--baseline DIR`` two checkouts are compared, each in its own
process: this checkout's and DIR's (e.g. main; a checkout that has
``tlalign_mm/testing/steps.py``), each running ``tools/benchmark.py
--worker`` of its own tree. This process sends both the same settings step
by step, in turns, and prints the baseline's settings as
``<setting>@baseline``, with ratios to this checkout's CutMix.

Printed: the operations a TL-Align step dispatches beyond a CutMix step,
per block (deterministic; ``--ops-only`` prints it alone, untimed); median
step time and the ratio to ``cutmix``; memory as the peak allocated on
CUDA, or on CPU as the bytes autograd saves for backward (the part of the
peak that TL-Align could change).

    .venv/bin/python tools/benchmark.py --model deit-small
    .venv/bin/python tools/benchmark.py --model swin-tiny --ops-only
    .venv/bin/python tools/benchmark.py --model deit-small --compile
    .venv/bin/python tools/benchmark.py --model demo-vit --threads 1
    .venv/bin/python tools/benchmark.py --model deit-small --device cuda \
        --batch-size 128 --bf16 --compile
    .venv/bin/python tools/benchmark.py --model deit-small --baseline \
        /work/main
"""
import argparse
import os
import os.path as osp
import statistics
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from prettytable import PrettyTable  # noqa: E402

from tlalign_mm.testing import steps  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model', default='deit-small',
                        choices=steps.MODELS_ZOO)
    parser.add_argument('--modes', default=None,
                        help='comma-separated settings (default: cutmix, '
                        'tlalign, dense for DeiT; with --compile also the '
                        'compiled cutmix and tlalign)')
    parser.add_argument('--compile', action='store_true',
                        help='also time the settings under torch.compile')
    parser.add_argument('--baseline', default=None, metavar='DIR',
                        help='also time the settings of the tlalign_mm '
                        'checkout in DIR, in its own process')
    parser.add_argument('--batch-size', type=int, default=None,
                        help='default: 64 for demo-*, 16 otherwise')
    parser.add_argument('--img-size', type=int, default=None,
                        help='default: 16 for demo-*, 224 otherwise')
    parser.add_argument('--num-classes', type=int, default=None,
                        help='default: 10 for demo-*, 1000 otherwise')
    parser.add_argument('--reps', type=int, default=None,
                        help='timed rounds (default: 50 for demo-*, 6)')
    parser.add_argument('--threads', type=int, default=None,
                        help='torch intra-op threads (default: torch\'s)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--bf16', action='store_true')
    parser.add_argument('--profile', action='store_true',
                        help='also print each setting\'s top operators '
                        '(torch.profiler, two steps)')
    parser.add_argument('--ops-only', action='store_true',
                        help='print the operations per block a TL-Align '
                        'step adds (deterministic) and stop: no timing')
    parser.add_argument('--worker', action='store_true',
                        help=argparse.SUPPRESS)  # one step per stdin line
    args = parser.parse_args(argv)
    demo = args.model.startswith('demo')
    for key, default in (('batch_size', steps.DEMO['batch_size'] if demo
                          else 16),
                         ('img_size', steps.DEMO['img_size'] if demo else 224),
                         ('num_classes', steps.DEMO['num_classes'] if demo
                          else 1000), ('reps', 50 if demo else 6)):
        if getattr(args, key) is None:
            setattr(args, key, default)
    if args.modes:
        # X@baseline: the baseline runs every setting given (as X@baseline)
        args.modes = list(dict.fromkeys(
            m.split('@')[0] for m in args.modes.split(',')))
    else:
        args.modes = ['cutmix', 'tlalign'] + (
            ['dense'] if args.model.startswith('deit') else [])
        if args.compile:
            args.modes += ['cutmix+compile', 'tlalign+compile']
    return args


class Settings:
    """The settings of one checkout (this process's ``tlalign_mm``): one
    model per setting, the same weights, one batch."""

    def __init__(self, args):
        if args.threads:
            torch.set_num_threads(args.threads)
        self.args, self.device = args, torch.device(args.device)
        self.data = steps.make_data(args.batch_size, args.img_size,
                                    args.num_classes, self.device)
        torch.manual_seed(0)
        base = steps.build(args.model, 'cutmix', args.num_classes)
        self.models, self.optims = {}, {}
        for mode in args.modes:
            m = steps.build(args.model, mode, args.num_classes)
            m.load_state_dict(base.state_dict())  # one set of weights
            m.to(self.device).train()
            if mode.endswith('+compile'):
                steps.compiled(m)
            self.models[mode] = m
            self.optims[mode] = torch.optim.AdamW(m.parameters(), lr=1e-4)

    def step(self, mode):
        return steps.step(self.models[mode], self.optims[mode], self.data,
                          mode, self.device, self.args.bf16,
                          self.args.num_classes)


def worker(args):
    """``--worker``: build the settings, then one step per line read
    (``mode``), answered by ``seconds bytes`` on stdout; everything else
    printed (logs) goes to stderr."""
    answers = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    settings = Settings(args)
    print('ready', file=answers, flush=True)
    for line in sys.stdin:
        t, mem = settings.step(line.strip())
        print(f'{t!r} {mem}', file=answers, flush=True)


class Baseline:
    """The settings of the checkout in ``root``, in a process of its own
    (``tools/benchmark.py --worker`` of that tree, on its package)."""

    def __init__(self, root, argv):
        env = dict(os.environ, PYTHONPATH=root)
        self.proc = subprocess.Popen(
            [sys.executable, osp.join(root, 'tools', 'benchmark.py'),
             '--worker', *argv], cwd=root, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != 'ready':
            raise SystemExit(f'--baseline {root}: its tools/benchmark.py '
                             f'--worker did not start (said {line!r}); it '
                             'needs tlalign_mm/testing/steps.py')

    def step(self, mode):
        self.proc.stdin.write(mode + '\n')
        self.proc.stdin.flush()
        t, mem = self.proc.stdout.readline().split()
        return float(t), int(mem)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    per_block = steps.extra_ops_per_block(args.model, steps.make_data(
        2, args.img_size, args.num_classes), args.num_classes)
    if args.ops_only:
        print(f'{args.model}: {per_block:.2f} operations per block, TL-Align '
              'beyond CutMix (forward + backward)')
        return
    ours = Settings(args)
    runners = {mode: (lambda m=mode: ours.step(m)) for mode in args.modes}
    baseline = None
    if args.baseline:
        root = osp.abspath(args.baseline)
        worker_argv = [a for a in argv if a not in ('--baseline', root,
                                                    args.baseline)]
        baseline = Baseline(root, worker_argv + ['--modes',
                                                 ','.join(args.modes)])
        for mode in args.modes:
            runners[f'{mode}@baseline'] = \
                lambda m=mode: baseline.step(m)
    times = {name: [] for name in runners}
    mems = {name: 0 for name in runners}
    warmup = 3 if args.compile else 1  # compiling takes the first calls
    try:
        for rep in range(args.reps + warmup):
            for name, run in runners.items():
                t, mem = run()
                if rep >= warmup:
                    times[name].append(t)
                    mems[name] = max(mems[name], mem)
    finally:
        if baseline is not None:
            baseline.close()
    device = ours.device
    mem_name = ('peak MiB' if device.type == 'cuda' else
                'saved-for-backward MiB')
    print(f'model={args.model} device={device} batch={args.batch_size} '
          f'img={args.img_size} classes={args.num_classes} bf16={args.bf16} '
          f'reps={args.reps} threads={torch.get_num_threads()}')
    print(f'operations per block, TL-Align beyond CutMix (forward + '
          f'backward): {per_block:.2f}')
    table = PrettyTable(['setting', 'step s', 'x cutmix', 'x own cutmix',
                         mem_name, 'x cutmix '])
    table.align = 'r'
    table.align['setting'] = 'l'
    ref = args.modes[0]
    ref_t, ref_m = statistics.median(times[ref]), mems[ref]
    for name in runners:
        t = statistics.median(times[name])
        # own cutmix: the CutMix setting of the same compile mode and
        # checkout (dense and TL-Align alike)
        own = name.replace('tlalign', 'cutmix').replace('dense', 'cutmix')
        own_t = statistics.median(times[own]) if own in times else ref_t
        table.add_row([name, f'{t:.4f}', f'{t / ref_t:.3f}',
                       f'{t / own_t:.3f}', f'{mems[name] / 2**20:.1f}',
                       f'{mems[name] / ref_m:.3f}'])
    print(table)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if device.type == 'cuda' else [])
        sort = 'self_cuda_time_total' if device.type == 'cuda' \
            else 'self_cpu_time_total'
        for mode in args.modes:
            with profile(activities=activities) as prof:
                for _ in range(2):
                    ours.step(mode)
            print(f'\n== {mode}: top operators over two steps ==')
            print(prof.key_averages().table(sort_by=sort, row_limit=18,
                                            max_name_column_width=48))
    return dict(times=times, mems=mems, per_block=per_block)


if __name__ == '__main__':
    main()
