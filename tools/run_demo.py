"""The main job: CutMix vs TL-Align on real data that ships with scikit-learn,
over several seeds, with paired statistics and a picture.

Trains the demo configs (``configs/demo/``: a tiny ViT and its SL-ViT twin)
with CutMix and with TL-Align, on every seed (:mod:`tlalign_mm.apis.demo`
says what runs and what is reported). Prints, per model, mean +- std of
each target, the paired difference with its 95% confidence interval (paired
t) and the seeds TL-Align won, lost and tied; the token-level number (how
far TL-Align's trained checkpoints move the CutMix target on held-out
mixes); and writes ``summary.json``, ``summary.md`` and ``summary.png``
under the work dir.

Each run is ``tools/train.py CONFIG --work-dir DIR --cfg-options
randomness.seed=SEED ...`` executed in a fresh process forked from this one
(``--jobs`` at a time, one thread each, so every run is deterministic and
repeatable on this machine), after the libraries were imported once.

    .venv/bin/python tools/run_demo.py                    # the main job
    .venv/bin/python tools/run_demo.py --seeds 0 1 2 --models ViT  # quick
    .venv/bin/python tools/run_demo.py --summarize        # re-read the runs
    .venv/bin/python tools/run_demo.py --seeds $(seq 0 19) \
        --variants tools/demo_variants/sl_vit_components.py  # an ablation

``--variants FILE`` replaces the two models by a grid of rows. FILE (read
by mmengine's ``Config``: ``.py``, ``.json`` or ``.yaml``) holds a list
``variants`` of dicts: ``name`` (the row's label, letters, digits and
``+-_.``), ``model`` (the demo model the row starts from: ``ViT`` or
``SL-ViT``), ``options`` (``--cfg-options`` of both twins) and
``tlalign_options`` (``--cfg-options`` of the TL-Align twin only, for
options only a ``TLAlignClassifier`` takes). Every row runs with each
target on every seed, and is reported like a model: paired with its own
CutMix twin.
"""
import os

# One thread per run, set before torch is imported: runs go side by side,
# one per core, and a fixed thread count keeps each run repeatable.
os.environ['OMP_NUM_THREADS'] = '1'
os.environ['MKL_NUM_THREADS'] = '1'

import argparse  # noqa: E402
import io  # noqa: E402
import multiprocessing  # noqa: E402
import os.path as osp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from multiprocessing.connection import wait  # noqa: E402

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

import mmengine  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from tqdm import tqdm  # noqa: E402

from tlalign_mm.apis import demo  # noqa: E402


class EpochProgress(Hook):
    """Tells the parent when an epoch of run ``index`` ends."""

    def __init__(self, index, progress):
        self.index, self.progress = index, progress

    def after_train_epoch(self, runner):
        # one small write: atomic on a pipe, whichever run sends it
        self.progress.send((self.index, runner.epoch + 1))


class ProgressLine:
    """tqdm over the epochs of all runs (so the ETA moves within runs),
    with the paired difference so far after it; redrawn in place on a
    terminal, printed as a line when a run ends otherwise (a log)."""

    def __init__(self, jobs, epochs_per_run: int):
        self.jobs, self.epochs_per_run = jobs, epochs_per_run
        self.tty = sys.stdout.isatty()
        # a log gets plain lines: runs, epochs, elapsed, ETA, difference
        line = None if self.tty else (
            '{desc}, {n_fmt}/{total_fmt} epochs, elapsed {elapsed}, ETA '
            '{remaining}{postfix}')
        self.bar = tqdm(total=len(jobs) * epochs_per_run, unit='epoch',
                        desc=f'0/{len(jobs)} runs', dynamic_ncols=True,
                        bar_format=line,
                        file=sys.stdout if self.tty else io.StringIO())
        self.epochs = {}

    def update(self, index: int, epochs: int) -> None:
        epochs = min(max(epochs, self.epochs.get(index, 0)),
                     self.epochs_per_run)
        self.bar.update(epochs - self.epochs.get(index, 0))
        self.epochs[index] = epochs

    def finish_run(self, records, index: int) -> None:
        self.update(index, self.epochs_per_run)
        self.bar.set_description_str(f'{len(records)}/{len(self.jobs)} runs')
        self.bar.set_postfix_str(demo.paired_so_far(self.jobs, records))
        if not self.tty:
            print(self.bar, flush=True)


def run_all(jobs, num_procs: int, epochs_per_run: int):
    """Run ``jobs`` in processes forked from this one, ``num_procs`` at a
    time, a fresh process for each (no state carries over between runs:
    ``ProcessPoolExecutor`` reuses its forked workers, and one killed
    worker breaks its whole pool). A run that fails, or whose process dies,
    comes back with ``error``."""
    # the digits, read once here (Digits caches them) for every forked run
    from tlalign_mm.datasets import Digits
    Digits(split='test')
    ctx = multiprocessing.get_context('fork')
    progress, sender = ctx.Pipe(duplex=False)
    bar = ProgressLine(jobs, epochs_per_run)
    waiting, running, records = list(jobs), {}, {}
    try:
        while waiting or running:
            while waiting and len(running) < num_procs:
                job = waiting.pop(0)
                os.makedirs(job.work_dir, exist_ok=True)
                if osp.exists(osp.join(job.work_dir, 'run.json')):
                    os.remove(osp.join(job.work_dir, 'run.json'))
                proc = ctx.Process(target=demo.run_job, args=(
                    job, [EpochProgress(job.index, sender)]))
                proc.start()
                running[proc.sentinel] = (job, proc)
            # a process ending or an epoch reported, whichever is first
            for ready in wait([*running, progress]):
                if ready is progress:
                    bar.update(*progress.recv())
                    continue
                job, proc = running.pop(ready)
                proc.join()
                records[job.index] = demo.read_record(job, proc.exitcode)
                bar.finish_run(records, job.index)
    finally:
        for _, proc in running.values():  # interrupted: stop the others
            proc.terminate()
        bar.bar.close()
    return [records[job.index] for job in jobs]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', type=int, nargs='+',
                        default=list(range(demo.DEFAULT_SEEDS)),
                        help=f'seeds (default: 0..{demo.DEFAULT_SEEDS - 1})')
    parser.add_argument('--models', nargs='+', choices=list(demo.MODELS),
                        default=None, help='default: all')
    parser.add_argument('--targets', nargs='+', choices=list(demo.TARGETS),
                        default=list(demo.TARGETS))
    parser.add_argument(
        '--variants', default=None, metavar='FILE',
        help='run a grid of rows (a model and its overrides, each paired '
        'with its own CutMix twin) instead of the models; see above')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument(
        '--jobs', type=int, default=len(os.sched_getaffinity(0)),
        help='runs side by side, one thread each (default: the usable '
        'cores)')
    parser.add_argument(
        '--epochs', type=int, default=None,
        help=f'train this many epochs instead of {demo.RECIPE_EPOCHS} (the '
        'warm-up and the cosine scale with it; for a quick look)')
    parser.add_argument('--cfg-options', nargs='+', default=[],
                        help='extra overrides passed to tools/train.py')
    parser.add_argument(
        '--summarize', action='store_true',
        help='do not train: re-read the runs in the work dir and write the '
        'tables and the picture again')
    args = parser.parse_args(argv)
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f'--seeds repeats a seed: {args.seeds}')
    if args.jobs < 1:
        parser.error('--jobs must be at least 1')
    if args.variants and args.models:
        parser.error('--variants names its own models; leave out --models')
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    rows = demo.read_variants(args.variants) if args.variants else [
        demo.Row(model, model) for model in (args.models or demo.MODELS)]
    names = [row.name for row in rows]
    jobs = demo.make_jobs(rows, args.targets, args.seeds, args.work_dir,
                          args.epochs, args.cfg_options)
    epochs = args.epochs or demo.RECIPE_EPOCHS
    for option in args.cfg_options:  # for the progress bar
        if option.startswith('train_cfg.max_epochs='):
            epochs = int(option.split('=', 1)[1])
    start = time.time()
    if args.summarize:
        records = []
        for job in jobs:
            path = osp.join(job.work_dir, 'run.json')
            if not osp.isfile(path):
                raise SystemExit(f'{path} is missing: run the job first.')
            records.append(mmengine.load(path))
    else:
        print(f'{len(jobs)} runs ({", ".join(names)} x '
              f'{", ".join(args.targets)} x {len(args.seeds)} seeds), '
              f'{args.jobs} at a time; logs in {args.work_dir}/*.log',
              flush=True)
        records = run_all(jobs, args.jobs, epochs)
    failed = [r for r in records if 'error' in r]
    if failed:
        for r in failed:
            print(f'\n{r["model"]} {r["target"]} seed {r["seed"]} failed; '
                  f'see {r["log_file"]}:\n{r["error"]}', file=sys.stderr)
        raise SystemExit(f'{len(failed)} of {len(records)} runs failed.')
    if args.summarize:
        meta = {k: v for k, v in mmengine.load(osp.join(
            args.work_dir, 'summary.json')).items()
            if k not in ('models', 'runs')}
    else:
        meta = dict(command=' '.join(['tools/run_demo.py'] +
                                     (argv if argv is not None
                                      else sys.argv[1:])),
                    epochs=epochs, seeds=list(args.seeds), jobs=args.jobs,
                    wall_s=time.time() - start, machine=demo.machine())
        if args.variants:
            meta['variants'] = [row._asdict() for row in rows]
    out = demo.write_outputs(args.work_dir, records, names, args.targets,
                             meta)
    print('\n' + out['markdown'])
    print('Per-run wall time (s): ' + ', '.join(
        f'{r["model"]} {r["target"]} {r["seed"]}: {r["wall_s"]:.0f}'
        for r in records))
    print(demo.per_run_line(records, meta['jobs']))
    print(f'Wrote {args.work_dir}/summary.json, summary.md, summary.png; '
          f'job wall time {demo.duration(meta["wall_s"])}.')
    return out


if __name__ == '__main__':
    main()
