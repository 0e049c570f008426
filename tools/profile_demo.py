"""Where a main-job run's time goes, and a demo iteration against the bare
model step.

Each run is one of the job's (:func:`tlalign_mm.apis.demo.run_job`'s: a demo
config through ``tools/train.py``'s runner, one thread, seed 0). What it
reads, all from the run itself:

- the iteration and its data loading: mmengine's ``IterTimerHook``
  (``train/time``, ``train/data_time`` of every iteration);
- the phases inside an iteration: ``torch.profiler`` over ``--profile-iters``
  iterations after the first epoch, by the labels torch and the package
  give them: the loader's ``enumerate(DataLoader)``, TL-Align's
  ``tlalign.align``, autograd's backward functions, ``Optimizer.step`` and
  ``zero_grad``; the rest is the data preprocessor with the mixing, the
  forward and loss less the alignment, gradient clipping and the hooks.
  Their shares of the profiled iterations are scaled to the mean iteration;
- the bare model step: after every epoch, ``--bare`` times forward, loss,
  backward and AdamW on a copy of the run's model and one batch the run's
  data preprocessor made (mixed, of the same shape), with no runner, loader
  or hook; left out of the run's time. ``iteration / bare`` compares
  interleaved measurements, so load on the machine hits both alike;
- the per-run fixed costs: runner build, set-up, validation (``val/time``),
  label shift.

    .venv/bin/python tools/profile_demo.py                 # the four demo runs
    .venv/bin/python tools/profile_demo.py --models ViT --targets TL-Align \
        --epochs 6
    .venv/bin/python tools/profile_demo.py --json profile.json
    # torch.compile of the loss, paid once per process: 3 runs of a model
    .venv/bin/python tools/profile_demo.py --models ViT --targets TL-Align \
        --seeds 0 1 2 [--compile]
"""
import os

os.environ['OMP_NUM_THREADS'] = '1'  # as the job's runs: one thread each
os.environ['MKL_NUM_THREADS'] = '1'

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import os.path as osp  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

import mmengine  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from tlalign_mm.apis import build_train_runner, demo, parse_train_args  # noqa: E402,E501
from tlalign_mm.apis.demo import markdown_table  # noqa: E402

#: phase -> how its profiler events are named (prefixes)
PHASES = {
    'data': ('enumerate(DataLoader)', ),
    'alignment': ('tlalign.align', ),
    'backward': ('autograd::engine::evaluate_function', ),
    'optimizer': ('Optimizer.step', 'Optimizer.zero_grad'),
}
REST = 'the rest: preprocess + mix, forward, clip, hooks'


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


@contextlib.contextmanager
def _own_random_state():
    state = np.random.get_state()
    with torch.random.fork_rng():
        yield
    np.random.set_state(state)


class BareSteps(Hook):
    """After each epoch, time ``n`` bare steps (default: an epoch's worth)
    of a second build of the run's model, with the run's weights as they
    were after its first step, on the first batch the run's preprocessor
    mixed; the run's random state is left as it was."""
    priority = 'LOWEST'

    def __init__(self, n=None, compile=False):
        self.n, self.compile, self.times, self.batch = n, compile, [], None

    def before_train(self, runner):
        if self.compile:
            compile_loss(runner.model)
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
        with _own_random_state():
            for _ in range(n):
                start = time.perf_counter()
                losses = self.model(**self.batch, mode='loss')
                sum(v for k, v in losses.items() if 'loss' in k).backward()
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.times.append(time.perf_counter() - start)


class PhaseProfile(Hook):
    """``torch.profiler`` over ``iters`` whole iterations after the first
    epoch (one step of the profiler per iteration)."""
    priority = 'VERY_LOW'

    def __init__(self, iters: int):
        self.iters, self.profiler = iters, None

    def before_train(self, runner):
        self.profiler = profile(
            activities=[ProfilerActivity.CPU], schedule=schedule(
                skip_first=len(runner.train_dataloader), wait=0, warmup=1,
                active=self.iters, repeat=1))
        self.profiler.start()

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        self.profiler.step()

    def after_train(self, runner):
        self.profiler.stop()

    def shares(self):
        """Each phase's share of the profiled iterations' time."""
        events = self.profiler.key_averages()
        total = sum(e.cpu_time_total for e in events
                    if e.key.startswith('ProfilerStep'))
        return {p: sum(e.cpu_time_total for e in events
                       if e.key.startswith(prefixes)) / total
                if total else float('nan') for p, prefixes in PHASES.items()}


def profile_run(job, bare_n, profile_iters, compile=False):
    """One run of the job's, timed; returns its numbers."""
    bare, phases = BareSteps(bare_n, compile), PhaseProfile(profile_iters)
    t0 = time.perf_counter()
    runner = build_train_runner(parse_train_args(
        [job.config, '--work-dir', job.work_dir, '--cfg-options',
         *job.options]), format_python_code=False)
    for hook in (bare, phases):
        runner.register_hook(hook)
    t1 = time.perf_counter()
    runner.train()
    t2 = time.perf_counter()
    demo.label_shift(job.config, demo.final_checkpoint(job.work_dir),
                     job.options)
    t3 = time.perf_counter()
    hub = runner.message_hub
    iteration = float(np.mean(hub.get_scalar('train/time').data[0]))
    iters = runner.train_loop.iter
    ms = {p: 1e3 * iteration * s for p, s in phases.shares().items()}
    # the loader alone, as IterTimerHook reads it
    ms['data'] = 1e3 * float(np.mean(hub.get_scalar('train/data_time').data[
        0]))
    ms['iteration'] = 1e3 * iteration
    ms[REST] = ms['iteration'] - sum(ms[p] for p in PHASES
                                     if p != 'alignment')
    bare_s = float(np.mean(bare.times))
    val = hub.get_scalar('val/time').data[0] if 'val/time' in \
        hub.log_scalars else []
    run_s = t3 - t0 - sum(bare.times)
    return dict(
        iters=iters, ms_per_iter=ms, bare_ms=1e3 * bare_s,
        fixed_s={'runner build': t1 - t0, 'validation': float(sum(val)),
                 'label shift': t3 - t2},
        run_s=run_s, ratio_iteration=iteration / bare_s,
        ratio_run=run_s / iters / bare_s)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', choices=list(demo.MODELS),
                        default=list(demo.FULL['models']),
                        help='default: the full job\'s, '
                        f'{", ".join(demo.FULL["models"])}')
    parser.add_argument('--targets', nargs='+', choices=list(demo.TARGETS),
                        default=list(demo.TARGETS))
    parser.add_argument('--seeds', type=int, nargs='+', default=[0],
                        help='runs per model and target, one after the '
                        'other in this process (default: seed 0)')
    parser.add_argument('--compile', action='store_true',
                        help='compile each run\'s loss (and the bare '
                        'step\'s): the first run of a model pays the '
                        'compile, the later ones reuse it')
    parser.add_argument('--epochs', type=int, default=None,
                        help='default: each model\'s recipe (its configs\' '
                        'train_cfg.max_epochs)')
    parser.add_argument('--bare', type=int, default=None,
                        help='bare steps after each epoch (default: as many '
                        'as the epoch has iterations)')
    parser.add_argument('--profile-iters', type=int, default=20,
                        help='iterations profiled for the phases')
    parser.add_argument('--cfg-options', nargs='+', default=[])
    parser.add_argument('--json', default=None, help='also write the '
                        'numbers here')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = demo.make_jobs(
            [demo.Row(m, m) for m in args.models], args.targets, args.seeds,
            tmp, args.epochs, args.cfg_options)
        models, targets = list(demo.MODELS), list(demo.TARGETS)
        for job in sorted(jobs, key=lambda j: (models.index(j.model),
                                               targets.index(j.target),
                                               j.seed)):
            name = f'{job.model} {job.target}' + (
                f' {job.seed}' if len(args.seeds) > 1 else '')
            print(f'profiling {name} ...', flush=True)
            with contextlib.redirect_stdout(sys.stderr):
                rows[name] = profile_run(job, args.bare, args.profile_iters,
                                         args.compile)
    keys = ['data', *list(PHASES)[1:], REST, 'iteration']
    table = [[f'ms per iteration: {k}'] + [f'{r["ms_per_iter"][k]:.2f}' for
                                          r in rows.values()] for k in keys]
    table.append(['bare model step'] + [f'{r["bare_ms"]:.2f}'
                                        for r in rows.values()])
    for key in next(iter(rows.values()))['fixed_s']:
        table.append([f's per run: {key}'] + [f'{r["fixed_s"][key]:.2f}'
                                             for r in rows.values()])
    table.append(['s per run (less the bare steps)'] + [
        f'{r["run_s"]:.2f}' for r in rows.values()])
    table.append(['iteration / bare step'] + [
        f'{r["ratio_iteration"]:.3f}' for r in rows.values()])
    table.append(['run / (iterations x bare)'] + [
        f'{r["ratio_run"]:.3f}' for r in rows.values()])
    print(markdown_table(['', *rows], table))
    print(f'\n(wall clock, means; torch {torch.__version__}, '
          f'{torch.get_num_threads()} thread, {os.cpu_count()} logical '
          f'CPUs, load average {os.getloadavg()[0]:.1f} at the end)')
    if args.json:
        mmengine.dump(rows, args.json, indent=1)
    return rows


if __name__ == '__main__':
    main()
