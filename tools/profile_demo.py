"""Where a main-job run's time goes, and a demo iteration against the bare
model step.

Each run is one of the job's (``tools/run_demo.py``): a demo config through
``tools/train.py`` (its ``main``, ``merge_args`` and ``build_runner``), one
thread, seed 0. Timers wrap the phases of an iteration (data loading, the
dataset's transforms, collation, the data preprocessor with the mixing,
forward and loss, the alignment inside it, backward, gradient clipping, the
optimizer, each hook) and the per-run fixed costs (config and runner build,
the set-up in ``runner.train()``, each validation, the checkpoint, the
label shift). After every epoch the bare model step runs ``--bare`` times:
forward, loss, backward and AdamW, on a copy of the run's model and one
batch the run's data preprocessor made (mixed, of the same shape), with no
runner, loader or hook; its time is left out of the run's. The ratio of the
two, epoch by epoch, compares interleaved measurements, so load on the
machine hits both alike.

    .venv/bin/python tools/profile_demo.py                 # the four demo runs
    .venv/bin/python tools/profile_demo.py --models ViT --targets TL-Align \
        --epochs 6
    .venv/bin/python tools/profile_demo.py --json profile.json
    # torch.compile of the loss, paid once per process: 3 runs of a model
    .venv/bin/python tools/profile_demo.py --models ViT --targets TL-Align \
        --seeds 0 1 2 [--compile]

The ratio the job is held to (issue 31) is ``iteration / bare``: a demo
iteration in the training loop (data, step, every per-iteration hook) over
the bare step. ``run / bare`` also spreads each run's fixed costs over its
iterations.
"""
import os

os.environ['OMP_NUM_THREADS'] = '1'  # as the job's runs: one thread each
os.environ['MKL_NUM_THREADS'] = '1'

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os.path as osp  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.optim import OptimWrapper  # noqa: E402
from mmengine.runner import EpochBasedTrainLoop, Runner, ValLoop  # noqa: E402
from torch.utils.data.dataloader import _BaseDataLoaderIter  # noqa: E402

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: the clock of every timer: wall time (``--clock wall``, for a quiet
#: machine) or this thread's CPU time (``--clock cpu``: a run is one
#: thread, and on a loaded machine its CPU time is what it would take alone)
now = time.perf_counter


def _load(name):
    spec = importlib.util.spec_from_file_location(
        f'profile_demo_{name}', osp.join(ROOT, 'tools', f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_demo = _load('run_demo')

#: per-iteration phases, in the order of an iteration; indented ones are
#: parts of the one above
PHASES = ('data', '  transforms', '  collate', 'preprocess + mix', 'forward',
          '  alignment', 'backward', 'grad clip', 'optimizer')


class Clock:
    """Seconds spent in named phases; ``training`` is set only inside an
    epoch's iterations, so the loader and model calls of validation and of
    the label shift are not counted as iteration phases."""

    def __init__(self):
        self.total = defaultdict(float)
        self.calls = defaultdict(int)
        self.training = False

    def wrap(self, name, fn, always=False):
        def timed(*args, **kwargs):
            if not (always or self.training):
                return fn(*args, **kwargs)
            start = now()
            try:
                return fn(*args, **kwargs)
            finally:
                self.total[name] += now() - start
                self.calls[name] += 1
        return timed

    @contextlib.contextmanager
    def span(self, name):
        start = now()
        try:
            yield
        finally:
            self.total[name] += now() - start
            self.calls[name] += 1


def compile_loss(model):
    """``model.loss`` under ``torch.compile`` (dynamic shapes: the last batch
    of an epoch is smaller), with the drop-path rates as Python floats
    (mmpretrain's numpy ones break the graph in every block). Runs in one
    process share the compiled code: the first run of a model pays the
    compile."""
    for module in model.modules():
        if hasattr(module, 'drop_prob'):
            module.drop_prob = float(module.drop_prob)
    model.loss = torch.compile(model.loss, dynamic=True)


class CompileLoss(Hook):
    priority = 'VERY_HIGH'

    def before_train(self, runner):
        compile_loss(runner.model)


def bare_step(model, optimizer, batch):
    """Forward, loss, backward, AdamW: the model step alone."""
    losses = model(**batch, mode='loss')
    loss = sum(v for k, v in losses.items() if 'loss' in k)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


class BareSteps(Hook):
    """After each epoch, time ``n`` bare steps (default: an epoch's worth)
    of a second build of the run's model, with the run's weights as they
    were after its first step, on the first batch the run's preprocessor
    mixed; the run's random state is left as it was."""

    def __init__(self, clock, n=None, compile=False):
        self.clock, self.n, self.times = clock, n, []
        self.model = self.batch = None
        self.compile = compile

    def before_train(self, runner):
        cfg = copy.deepcopy(runner.cfg.model)
        cfg.setdefault('data_preprocessor', runner.cfg.get(
            'data_preprocessor'))
        self.model = runner.build_model(cfg)
        if self.compile:
            compile_loss(self.model)
        opt = runner.cfg.optim_wrapper.optimizer
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=opt.lr,
            weight_decay=opt.weight_decay, fused=True)

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        if self.batch is not None:
            return
        self.model.load_state_dict(runner.model.state_dict())
        self.model.train()
        with _own_random_state():
            samples = [s.clone() for s in data_batch['data_samples']]
            self.batch = self.model.data_preprocessor(
                dict(data_batch, data_samples=samples), True)

    def after_train_epoch(self, runner):
        n = len(runner.train_dataloader) if self.n is None else self.n
        training, self.clock.training = self.clock.training, False
        with _own_random_state():
            for _ in range(n):
                start = now()
                bare_step(self.model, self.optimizer, self.batch)
                self.times.append(now() - start)
        self.clock.training = training


@contextlib.contextmanager
def _own_random_state():
    state = np.random.get_state()
    with torch.random.fork_rng():
        yield
    np.random.set_state(state)


def instrument(clock, runner, bare):
    """Timers on the phases of ``runner``'s training (patches undone by the
    returned ExitStack)."""
    stack = contextlib.ExitStack()
    patch = stack.enter_context
    model = runner.model
    model.data_preprocessor.forward = clock.wrap(
        'preprocess + mix', model.data_preprocessor.forward)
    model.loss = clock.wrap('forward', model.loss)
    aligned = sys.modules.get('tlalign_mm.models.aligned_forward')
    if aligned is not None and hasattr(aligned, 'align'):
        patch(mock.patch.object(aligned, 'align',
                                clock.wrap('  alignment', aligned.align)))
    for name, method in (('backward', OptimWrapper.backward),
                         ('grad clip', OptimWrapper._clip_grad),
                         ('optimizer', OptimWrapper.step),
                         ('optimizer', OptimWrapper.zero_grad)):
        patch(mock.patch.object(OptimWrapper, method.__name__,
                                clock.wrap(name, method)))
    patch(mock.patch.object(_BaseDataLoaderIter, '__next__',
                            clock.wrap('data', _BaseDataLoaderIter.__next__)))

    build_dataloader = Runner.build_dataloader

    def build_timed_dataloader(*args, **kwargs):
        loader = build_dataloader(*args, **kwargs)
        loader.collate_fn = clock.wrap('  collate', loader.collate_fn)
        # the dataset's samples and transforms: a batch at once where the
        # dataset makes one (Digits), else sample by sample
        dataset, name = loader.dataset, 'prepare_data'
        if callable(getattr(dataset, '__getitems__', None)):
            name = '__getitems__'
        setattr(dataset, name,
                clock.wrap('  transforms', getattr(dataset, name)))
        return loader
    patch(mock.patch.object(Runner, 'build_dataloader',
                            staticmethod(build_timed_dataloader)))

    def call_hook(self, fn_name, **kwargs):
        for hook in self._hooks:
            if hasattr(hook, fn_name):
                with clock.span(f'hook {type(hook).__name__}.{fn_name}'):
                    getattr(hook, fn_name)(self, **kwargs)
    patch(mock.patch.object(Runner, 'call_hook', call_hook))

    run_epoch = EpochBasedTrainLoop.run_epoch

    def timed_epoch(self):
        clock.training = True
        try:
            with clock.span('epochs'):
                run_epoch(self)
        finally:
            clock.training = False
    patch(mock.patch.object(EpochBasedTrainLoop, 'run_epoch', timed_epoch))
    train_run = EpochBasedTrainLoop.run
    patch(mock.patch.object(EpochBasedTrainLoop, 'run', clock.wrap(
        'training loop', train_run, always=True)))
    patch(mock.patch.object(ValLoop, 'run', clock.wrap(
        'validation', ValLoop.run, always=True)))
    runner.register_hook(bare, priority='LOWEST')
    return stack


def profile_run(train, job, bare_n, compile=False):
    """One run of the job's (``run_demo``'s ``_train``, then its label
    shift), timed, its loss compiled if asked; returns the clock, the bare
    step's times and the run's iteration count."""
    clock = Clock()
    bare = BareSteps(clock, bare_n, compile)
    build_runner, stacks, runners = train.build_runner, [], []

    def build(cfg):
        with clock.span('runner build'):
            runner = build_runner(cfg)
        if compile:
            runner.register_hook(CompileLoss())
        stacks.append(instrument(clock, runner, bare))
        runners.append(runner)
        return runner

    run_demo._TRAIN, train.build_runner = train, build
    try:
        with clock.span('tools/train.py main'):
            run_demo._train(job)
    finally:
        train.build_runner = build_runner
        for stack in stacks:
            stack.close()
    with clock.span('label shift'):
        run_demo.label_shift(job.config,
                             run_demo.final_checkpoint(job.work_dir),
                             job.options)
    return clock, bare.times, runners[0].train_loop.iter


def report(name, clock, bare_times, iters):
    """A dict of the run's per-iteration and per-run numbers."""
    t = clock.total
    ms = {p: 1e3 * t[p] / iters for p in PHASES}
    hooks = defaultdict(float)
    epoch_hooks = 0.0
    for key, value in t.items():
        if not key.startswith('hook '):
            continue
        hook, stage = key[5:].rsplit('.', 1)
        if hook == 'BareSteps':
            continue
        if stage.endswith('_iter'):
            hooks[hook] += value
        elif stage in ('before_train_epoch', 'after_train_epoch'):
            epoch_hooks += value
    ms['hooks (per iteration)'] = 1e3 * sum(hooks.values()) / iters
    bare_s = t['hook BareSteps.after_train_epoch']
    # an epoch's time less its epoch-level hooks (the bare steps, the
    # checkpoint, the drift log) is its iterations'
    in_epochs = t['epochs'] - epoch_hooks - bare_s
    ms['iteration'] = 1e3 * in_epochs / iters
    named = sum(ms[p] for p in PHASES if not p.startswith(' ')) + \
        ms['hooks (per iteration)']
    ms['rest of the loop'] = ms['iteration'] - named
    bare = sum(bare_times) / len(bare_times) if bare_times else float('nan')
    run_s = t['tools/train.py main'] + t['label shift'] - bare_s
    fixed = {
        'runner build': t['runner build'],
        'set-up in runner.train()': t['tools/train.py main'] -
        t['runner build'] - t['training loop'],
        f'validation ({clock.calls["validation"]}x)': t['validation'],
        'epoch hooks (checkpoint, logs)': epoch_hooks,
        'label shift': t['label shift'],
    }
    fixed['all fixed'] = sum(fixed.values())
    return dict(name=name, iters=iters, ms_per_iter=ms,
                hooks_ms={k: 1e3 * v / iters for k, v in hooks.items()},
                fixed_s=fixed, run_s=run_s, bare_ms=1e3 * bare,
                bare_n=len(bare_times),
                ratio_iteration=ms['iteration'] / (1e3 * bare),
                ratio_run=run_s / iters / bare)


def print_report(rows):
    names = [r['name'] for r in rows]
    width = max(26, *(len(n) for n in names))
    print(f'\n{"ms per iteration":{width}s} ' +
          ' '.join(f'{n:>16s}' for n in names))
    keys = list(PHASES) + ['hooks (per iteration)', 'rest of the loop',
                           'iteration']
    for key in keys:
        print(f'{key:{width}s} ' + ' '.join(
            f'{r["ms_per_iter"][key]:16.2f}' for r in rows))
    print(f'{"bare model step":{width}s} ' + ' '.join(
        f'{r["bare_ms"]:16.2f}' for r in rows))
    hooks = sorted({h for r in rows for h in r['hooks_ms']})
    print(f'\n{"hooks, ms per iteration":{width}s}')
    for hook in hooks:
        print(f'  {hook:{width - 2}s} ' + ' '.join(
            f'{r["hooks_ms"].get(hook, 0):16.2f}' for r in rows))
    print(f'\n{"s per run":{width}s}')
    for key in rows[0]['fixed_s']:
        print(f'{key:{width}s} ' + ' '.join(
            f'{r["fixed_s"][key]:16.2f}' for r in rows))
    print(f'{"run (less the bare steps)":{width}s} ' + ' '.join(
        f'{r["run_s"]:16.2f}' for r in rows))
    print(f'\n{"iteration / bare step":{width}s} ' + ' '.join(
        f'{r["ratio_iteration"]:16.3f}' for r in rows))
    print(f'{"run / (iterations x bare)":{width}s} ' + ' '.join(
        f'{r["ratio_run"]:16.3f}' for r in rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', choices=list(run_demo.MODELS),
                        default=list(run_demo.MODELS))
    parser.add_argument('--targets', nargs='+',
                        choices=list(run_demo.TARGETS),
                        default=list(run_demo.TARGETS))
    parser.add_argument('--seeds', type=int, nargs='+', default=[0],
                        help='runs per model and target, one after the '
                        'other in this process (default: seed 0)')
    parser.add_argument('--compile', action='store_true',
                        help='compile each run\'s loss (and the bare '
                        'step\'s): the first run of a model pays the '
                        'compile, the later ones reuse it')
    parser.add_argument('--epochs', type=int, default=None,
                        help='default: the recipe\'s 30')
    parser.add_argument('--bare', type=int, default=None,
                        help='bare steps after each epoch (default: as many '
                        'as the epoch has iterations)')
    parser.add_argument('--cfg-options', nargs='+', default=[])
    parser.add_argument('--clock', choices=('wall', 'cpu'), default='wall',
                        help='wall time (a quiet machine) or the thread\'s '
                        'CPU time (a loaded one)')
    parser.add_argument('--json', default=None, help='also write the '
                        'numbers here')
    args = parser.parse_args(argv)
    global now
    now = time.perf_counter if args.clock == 'wall' else time.thread_time
    torch.set_num_threads(1)
    train = run_demo._import_train()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = run_demo.make_jobs(run_demo.parse_args(
            ['--models', *args.models, '--targets', *args.targets, '--seeds',
             *map(str, args.seeds), '--work-dir', tmp] +
            (['--epochs', str(args.epochs)] if args.epochs else []) +
            (['--cfg-options', *args.cfg_options] if args.cfg_options
             else [])))
        models, targets = list(run_demo.MODELS), list(run_demo.TARGETS)
        for job in sorted(jobs, key=lambda j: (models.index(j.model),
                                               targets.index(j.target),
                                               j.seed)):
            name = f'{job.model} {job.target}'
            if len(args.seeds) > 1:
                name += f' {job.seed}'
            print(f'profiling {name} ...', flush=True)
            with contextlib.redirect_stdout(sys.stderr):
                clock, bare, iters = profile_run(train, job, args.bare,
                                                 args.compile)
            rows.append(report(name, clock, bare, iters))
    print_report(rows)
    print(f'\n({args.clock} clock, means; torch {torch.__version__}, '
          f'{torch.get_num_threads()} thread, {os.cpu_count()} logical '
          f'CPUs, load average {os.getloadavg()[0]:.1f} at the end)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == '__main__':
    main()
