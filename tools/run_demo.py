"""The main job: CutMix vs TL-Align on real data that ships with
scikit-learn (its handwritten digits), over several seeds, with paired
statistics and a picture.

By default it trains the default job of configs/demo/main_job.yml (see
--full and --models below for what it is now: one model with CutMix and with
TL-Align on four seeds, at most five minutes on two idle cores). Before it
starts it times a few training steps of each kind of run and prints how
many runs it will do and about how long they will take here, and how long
the full evidence would. At the end it prints, and writes to
WORK_DIR/summary.{md,json,png}: each target's mean +- std; the paired
difference TL-Align - CutMix with its 95% confidence interval (paired t),
the paired t and Wilcoxon p-values and the seeds TL-Align won, lost and
tied; the label shift (how far TL-Align moves the CutMix target: the
trained checkpoints on the held-out images mixed by CutMix in batches of
8, 45 boxes); the learning curves; and beside them the recorded full
evidence (configs/demo/main_job_recorded.json). A handful
of seeds gives a wide interval; the recorded twenty per cell are the
evidence, and --full runs them again (about 45 minutes on two idle
cores).

Each model runs its configs' recipe (30 epochs for the digits, 60 for
ViT-c24; --epochs N runs N instead). Each run is `tools/train.py CONFIG
--work-dir DIR --cfg-options randomness.seed=SEED ...`, executed in a
fresh process forked from this one (--jobs at a time, one thread each, so
every run is deterministic and repeatable on this machine), after the
libraries were imported once; its run.json records the settings it ran
with and the command that repeats it.
A mistake in these options, or in a config they make, is one `error:` line
before any run starts (--debug: the traceback).

  tools/run_demo.py                        # the default job, ~5 min
  tools/run_demo.py --full                 # 20 seeds per cell, ~30 min
  tools/run_demo.py --models ViT --seeds 0 1 --epochs 2   # a quick look
  tools/run_demo.py --summarize            # re-read the work dir's runs
  tools/run_demo.py --full --variants tools/demo_variants/sl_vit_components.py
                                           # an ablation, 20 seeds a row

--summarize trains nothing: it reads every run in the work dir (a folder
with a run.json; --models, --targets and --seeds pick some), refuses runs
that ran with different settings (epochs, options, code version), and
writes the tables and the picture again. --record FILE (after a job or
with --summarize) writes the runs' models into a recorded-evidence file
such as configs/demo/main_job_recorded.json.

--variants FILE replaces the models by a grid of rows. FILE (read by
mmengine's Config: .py, .json or .yaml) holds a list `variants` of dicts:
`name` (the row's label: letters, digits and +-_.), `model` (the demo
model the row starts from, one of --models' choices), `options`
(--cfg-options of both runs of a seed) and `tlalign_options` (of the
TL-Align run only, for options only a TLAlignClassifier takes). Every row
runs with each target on every seed and is reported like a model: paired
with its own CutMix twin.
"""
import os

# One thread per run, set before torch is imported: runs go side by side,
# one per core, and a fixed thread count keeps each run repeatable.
os.environ['OMP_NUM_THREADS'] = '1'
os.environ['MKL_NUM_THREADS'] = '1'

import argparse  # noqa: E402
import io  # noqa: E402
import os.path as osp  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import yaml  # noqa: E402

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)
# what --help names, read without importing the libraries (seconds)
with open(osp.join(ROOT, 'configs', 'demo', 'main_job.yml')) as _f:
    SPEC = yaml.safe_load(_f)
WORK_DIR = 'work_dirs/demo'


class Parser(argparse.ArgumentParser):
    """A mistake in the arguments is one ``error:`` line (exit status 1),
    not the usage block."""

    def error(self, message):
        self.exit(1, f'error: {message} (tools/run_demo.py --help)\n')


def parse_args(argv=None):
    default, full = SPEC['default'], SPEC['full']
    parser = Parser(prog='tools/run_demo.py', description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        '--full', action='store_true',
        help=f'the full evidence: {", ".join(full["models"])}, seeds '
        f'0-{full["seeds"] - 1} (the default: {", ".join(default["models"])}'
        f', seeds 0-{default["seeds"] - 1})')
    parser.add_argument('--seeds', type=int, nargs='+', default=None,
                        help=f'seeds (default: 0-{default["seeds"] - 1}; '
                        'with --summarize: every seed found)')
    parser.add_argument('--models', nargs='+', choices=list(SPEC['models']),
                        default=None,
                        help=f'default: {", ".join(default["models"])} '
                        f'(--full: {", ".join(full["models"])}; with '
                        '--summarize: every model found)')
    parser.add_argument('--targets', nargs='+',
                        choices=list(SPEC['targets']), default=None,
                        help='default: all (with --summarize: every target '
                        'found)')
    parser.add_argument(
        '--variants', default=None, metavar='FILE',
        help='run a grid of rows (a model and its overrides, each paired '
        'with its own CutMix twin) instead of the models: the file\'s '
        'format is described above')
    parser.add_argument('--work-dir', default=WORK_DIR,
                        help=f'where the runs and the summary go (default: '
                        f'{WORK_DIR})')
    parser.add_argument(
        '--jobs', type=int, default=len(os.sched_getaffinity(0)),
        help='runs side by side, one thread each (default: the usable '
        'cores)')
    parser.add_argument(
        '--epochs', type=int, default=None,
        help='train this many epochs instead of each model\'s recipe (its '
        'configs\' train_cfg.max_epochs: 30 for the digits, 60 on the '
        'canvas; at least 2; the warm-up keeps its share and the cosine '
        'takes the rest; for a quick look)')
    parser.add_argument('--cfg-options', nargs='+', default=[],
                        metavar='KEY=VALUE',
                        help='extra overrides of every run, as '
                        'tools/train.py takes them')
    parser.add_argument(
        '--summarize', action='store_true',
        help='do not train: re-read the runs in the work dir and write the '
        'tables and the picture again')
    parser.add_argument(
        '--record', default=None, metavar='FILE',
        help='also write the runs\' models into this recorded-evidence file '
        '(e.g. configs/demo/main_job_recorded.json), replacing their '
        'entries')
    parser.add_argument('--debug', action='store_true',
                        help='a mistake shows its traceback')
    args = parser.parse_args(argv)
    if args.seeds is not None and len(set(args.seeds)) != len(args.seeds):
        parser.error(f'--seeds repeats a seed: {args.seeds}')
    if args.seeds is not None and min(args.seeds) < 0:
        parser.error(f'--seeds must be non-negative: {args.seeds}')
    if args.full and args.seeds is not None:
        parser.error(f'--full is seeds 0-{SPEC["full"]["seeds"] - 1}; '
                     'leave out --seeds (or --full)')
    if args.jobs < 1:
        parser.error('--jobs must be at least 1')
    if args.epochs is not None and args.epochs < 2:
        parser.error(f'--epochs {args.epochs}: a run needs at least 2 '
                     'epochs (a warm-up epoch and a cosine one)')
    bad = [o for o in args.cfg_options if '=' not in o]
    if bad:
        parser.error(f'--cfg-options takes KEY=VALUE, got {bad}')
    if args.variants and args.models:
        parser.error('--variants names its own models; leave out --models')
    if args.variants and not osp.isfile(args.variants):
        parser.error(f'--variants {args.variants}: no such file')
    if args.record and osp.isdir(args.record):
        parser.error(f'--record {args.record} is a directory; name a file')
    return args


def run_all(jobs, num_procs: int):
    """Run ``jobs`` in processes forked from this one, ``num_procs`` at a
    time, a fresh process for each (no state carries over between runs:
    ``ProcessPoolExecutor`` reuses its forked workers, and one killed
    worker breaks its whole pool). A run that fails, or whose process dies,
    comes back with ``error``."""
    import multiprocessing
    from multiprocessing.connection import wait

    from tlalign_mm.apis import demo
    ctx = multiprocessing.get_context('fork')
    progress, sender = ctx.Pipe(duplex=False)
    bar = ProgressLine(jobs)
    waiting, running, records = list(jobs), {}, {}
    try:
        while waiting or running:
            while waiting and len(running) < num_procs:
                job = waiting.pop(0)
                os.makedirs(job.work_dir, exist_ok=True)
                if osp.exists(osp.join(job.work_dir, 'run.json')):
                    os.remove(osp.join(job.work_dir, 'run.json'))
                proc = ctx.Process(target=demo.run_job, args=(
                    job, [demo.EpochProgress(job.index, sender)]))
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


class ProgressLine:
    """tqdm over the epochs of all runs (so the ETA moves within runs;
    each run has its own length), with the paired difference so far after
    it; redrawn in place on a terminal, printed as a line when a run ends
    otherwise (a log)."""

    def __init__(self, jobs):
        from tqdm import tqdm
        self.jobs = jobs
        self.length = {job.index: job.epochs for job in jobs}
        self.tty = sys.stdout.isatty()
        # a log gets plain lines: runs, epochs, elapsed, ETA, difference
        line = None if self.tty else (
            '{desc}, {n_fmt}/{total_fmt} epochs, elapsed {elapsed}, ETA '
            '{remaining}{postfix}')
        self.bar = tqdm(total=sum(job.epochs for job in jobs), unit='epoch',
                        desc=f'0/{len(jobs)} runs', dynamic_ncols=True,
                        bar_format=line,
                        file=sys.stdout if self.tty else io.StringIO())
        self.epochs = {}

    def update(self, index: int, epochs: int) -> None:
        epochs = min(max(epochs, self.epochs.get(index, 0)),
                     self.length[index])
        self.bar.update(epochs - self.epochs.get(index, 0))
        self.epochs[index] = epochs

    def finish_run(self, records, index: int) -> None:
        from tlalign_mm.apis import demo
        self.update(index, self.length[index])
        self.bar.set_description_str(f'{len(records)}/{len(self.jobs)} runs')
        self.bar.set_postfix_str(demo.paired_so_far(self.jobs, records))
        if not self.tty:
            print(self.bar, flush=True)


def _seeds(seeds) -> str:
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f'{seeds[0]}-{seeds[-1]}'
    return ' '.join(map(str, seeds))


def full_command(args) -> str:
    """This command with --full in place of its seeds."""
    words = ['.venv/bin/python tools/run_demo.py --full']
    for flag, value in (('--models', args.models),
                        ('--targets', args.targets),
                        ('--variants', args.variants),
                        ('--epochs', args.epochs),
                        ('--cfg-options', args.cfg_options)):
        if value:
            words.append(f'{flag} {" ".join(map(str, value))}'
                         if isinstance(value, list) else f'{flag} {value}')
    if args.work_dir != WORK_DIR:
        words.append(f'--work-dir {args.work_dir}')
    return ' '.join(words)


def train(args, argv, demo):
    """Plan, check and time, run the job; returns its records and meta."""
    full = args.full
    rows = demo.read_variants(args.variants) if args.variants else \
        demo.default_rows(args.models, full)
    targets = args.targets or list(demo.TARGETS)
    seeds = args.seeds if args.seeds is not None else \
        demo.default_seeds(full)
    code = demo.code_version()
    jobs = demo.make_jobs(rows, targets, seeds, args.work_dir, args.epochs,
                          args.cfg_options, code)
    # the full evidence of what this job runs (or of the default job)
    full_rows = rows if args.variants or args.models else \
        demo.default_rows(full=True)
    full_jobs = [] if full else demo.make_jobs(
        full_rows, targets, demo.default_seeds(True), args.work_dir,
        args.epochs, args.cfg_options, code)
    demo.preload()
    print('Checking the configs and timing a few training steps of each '
          'kind of run ...', flush=True)
    per_run = demo.check_and_time(jobs + full_jobs, args.jobs)
    estimate = demo.estimate(jobs, per_run, args.jobs)
    kinds = ', '.join(f'{m} {t} {demo.duration(s)}'
                      for (m, t), s in per_run.items()
                      if any((j.model, j.target) == (m, t) for j in jobs))
    print(f'{len(jobs)} runs ({", ".join(r.name for r in rows)} x '
          f'{", ".join(targets)} x seeds {_seeds(seeds)}, '
          f'{demo.epochs_text(demo.run_lengths(jobs))}'
          f'{" each" if len(set(j.epochs for j in jobs)) == 1 else ""}), '
          f'{args.jobs} at a time: about '
          f'{demo.duration(estimate)} on this machine (a run: {kinds}).')
    if full_jobs:
        print(f'The full evidence, {demo.FULL["seeds"]} seeds per cell '
              f'({len(full_jobs)} runs, about '
              f'{demo.duration(demo.estimate(full_jobs, per_run, args.jobs))}'
              f' here): {full_command(args)}')
    print(f'Logs: {args.work_dir}/*.log', flush=True)
    start = time.time()
    records = run_all(jobs, args.jobs)
    meta = dict(command=' '.join(['tools/run_demo.py'] + (
        argv if argv is not None else sys.argv[1:])),
        epochs=demo.run_lengths(jobs),
        seeds=list(seeds), jobs=args.jobs, wall_s=time.time() - start,
        estimate_s=estimate, machine=demo.machine())
    if args.variants:
        meta['variants'] = [row._asdict() for row in rows]
    return records, [r.name for r in rows], targets, meta


def reread(args, argv, demo):
    """The work dir's runs (one pass), for --summarize; returns them and
    the meta of the summary."""
    import mmengine
    models = [r.name for r in demo.read_variants(args.variants)] \
        if args.variants else args.models
    records = demo.find_runs(args.work_dir, models, args.targets,
                             args.seeds)
    names = list(dict.fromkeys(r['model'] for r in records))
    targets = list(dict.fromkeys(r['target'] for r in records))
    seeds = sorted({r['seed'] for r in records})
    print(f'Read {len(records)} runs: {", ".join(names)} x '
          f'{", ".join(targets)} x seeds {_seeds(seeds)}.', flush=True)
    if any('error' in r for r in records):
        return records, names, targets, {}
    demo.check_one_pass(records, args.work_dir)
    records, notes = demo.complete_seeds(records)
    for note in notes:
        print(note)
    seeds = sorted({r['seed'] for r in records})
    # the job's own meta (its wall time), where these are its runs
    path = osp.join(args.work_dir, 'summary.json')
    old = mmengine.load(path) if osp.isfile(path) else {}
    key = sorted(demo.run_name(r['model'], r['target'], r['seed'])
                 for r in records)
    if old and sorted(demo.run_name(r['model'], r['target'], r['seed'])
                      for r in old.get('runs', [])) == key:
        meta = {k: v for k, v in old.items()
                if k not in ('models', 'runs', 'recorded')}
    else:
        meta = dict(command=' '.join(['tools/run_demo.py'] + (
            argv if argv is not None else sys.argv[1:])), jobs=None,
            wall_s=None, machine=demo.machine())
    meta.update(seeds=seeds, epochs=demo.run_lengths(records))
    return records, names, targets, meta


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.debug:  # the checks' children send their tracebacks too
        os.environ['TLALIGN_DEBUG'] = '1'
    if args.summarize:
        print(f'Reading the runs in {args.work_dir} (loading the libraries '
              'first) ...', flush=True)
    else:
        what = f'the rows of {args.variants}' if args.variants else \
            ', '.join(args.models or
                      SPEC['full' if args.full else 'default']['models'])
        print(f'The main job{" (full)" if args.full else ""}: CutMix vs '
              f'TL-Align, {what}; loading the libraries ...', flush=True)
    from tlalign_mm.apis import demo
    try:
        records, names, targets, meta = (reread if args.summarize else train)(
            args, argv, demo)
    except demo.JobError as error:
        if args.debug:
            raise
        raise SystemExit(f'error: {error}') from None
    failed = [r for r in records if 'error' in r]
    if failed:
        for r in failed:
            print(f'\n{r["model"]} {r["target"]} seed {r["seed"]} failed; '
                  f'see {r["log_file"]}:\n{r["error"]}', file=sys.stderr)
        raise SystemExit(f'{len(failed)} of {len(records)} runs failed.')
    recorded = demo.read_recorded()
    if not set(names) & set(recorded):
        recorded = None  # no recorded evidence of these models
    print(f'Writing {args.work_dir}/summary.json, summary.md, summary.png '
          '...', flush=True)
    out = demo.write_outputs(args.work_dir, records, names, targets, meta,
                             recorded)
    print('\n' + out['markdown'])
    if meta.get('wall_s') is not None:
        print(demo.per_run_line(records, meta['jobs']))
    print(demo.headline(out['summary'], out['recorded'], meta['seeds'],
                        demo.FULL['seeds']))
    wall = '' if meta.get('wall_s') is None else \
        f'; the job took {demo.duration(meta["wall_s"])}' + (
            f' (estimated {demo.duration(meta["estimate_s"])})'
            if meta.get('estimate_s') else '')
    print(f'Wrote {args.work_dir}/summary.json, summary.md, summary.png '
          f'(the picture: each seed\'s two runs joined, the learning '
          f'curves, the intervals beside the recorded ones){wall}.')
    if args.record:
        demo.write_recorded(args.record, demo.to_recorded(records, meta))
        print(f'Recorded {", ".join(names)} in {args.record}.')
    return out


if __name__ == '__main__':
    main()
