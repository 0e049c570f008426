"""The main job: CutMix vs TL-Align on real data that ships with scikit-learn,
over several seeds, with paired statistics and a picture.

Trains the demo configs (``configs/demo/``: a tiny ViT and its SL-ViT twin,
with Shifted Patch Tokenization and Locality Self-Attention, from scratch on
the handwritten digits) with CutMix and with TL-Align, on every seed. Runs
with the same seed share the initial weights, the data order and the mixing
draws, so the per-seed difference isolates the target. Prints, per model,
mean +- std of each target, the paired difference with its 95% confidence
interval (paired t) and the seeds TL-Align won, lost and tied; the
token-level number (how far TL-Align's trained checkpoints move the CutMix
target on held-out mixes); and writes ``summary.json``, ``summary.md`` and
``summary.png`` under the work dir.

Each run is ``tools/train.py CONFIG --work-dir DIR --cfg-options
randomness.seed=SEED ...`` executed in a process forked from this one
(``--jobs`` at a time, one thread each, so every run is deterministic and
repeatable on this machine), after the libraries were imported once.

    .venv/bin/python tools/run_demo.py                    # the main job
    .venv/bin/python tools/run_demo.py --seeds 0 1 2 --models ViT  # quick
    .venv/bin/python tools/run_demo.py --summarize        # re-read the runs
    .venv/bin/python tools/run_demo.py --seeds $(seq 0 19) \
        --variants tools/demo_variants/sl_vit_components.py  # an ablation
    .venv/bin/python tools/run_demo.py --models ViT-c24 --epochs 60 \
        --jobs 1  # issue 42: the digits small on a canvas (60-epoch recipe)

``--variants FILE`` replaces the two models by a grid of rows. FILE (read
by mmengine's ``Config``: ``.py``, ``.json`` or ``.yaml``) holds a list
``variants`` of dicts: ``name`` (the row's label, letters, digits and
``+-_.``), ``model`` (the demo model the row starts from: ``ViT``,
``SL-ViT`` or ``ViT-c24``), ``options`` (``--cfg-options`` of both twins) and
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
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import os.path as osp  # noqa: E402
import platform  # noqa: E402
import queue as queue_lib  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Dict, List, NamedTuple, Optional  # noqa: E402

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
from mmengine.config import Config, DictAction  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402

import tlalign_mm  # noqa: E402,F401  (registers modules)
from tlalign_mm.analysis import figures  # noqa: E402
from tlalign_mm.analysis.paired_stats import (  # noqa: E402
    paired_difference,
    spread,
)

# Each demo model's configs, by name (`{target}`: cutmix or tlalign).
# ViT-c24 (issue 42) is the ViT on the digits in the middle of a 24x24
# canvas, where CutMix's area label is wrong; its recipe is 60 epochs (run
# it with --epochs 60), and it is not in the default job.
MODELS = {'ViT': 'vit-tiny-p4_1xb64-{target}_digits',
          'SL-ViT': 'sl-vit-tiny-p4_1xb64-{target}_digits',
          'ViT-c24': 'vit-tiny-p8_1xb64-{target}_digits-c24'}
DEFAULT_MODELS = ['ViT', 'SL-ViT']
TARGETS = {'CutMix': 'cutmix', 'TL-Align': 'tlalign'}
BASELINE = 'CutMix'
# Twenty seeds per cell: five left a half-point effect undecided (issue 25);
# the job's time on two idle cores is in the README (Results).
DEFAULT_SEEDS = 20
RECIPE_EPOCHS, RECIPE_WARMUP = 30, 3


class Row(NamedTuple):
    """One row of the grid: a demo model and the overrides that make the
    row (see the module docstring, ``--variants``)."""
    name: str
    model: str
    options: tuple = ()
    tlalign_options: tuple = ()


class Job(NamedTuple):
    index: int
    model: str
    target: str
    seed: int
    config: str
    work_dir: str
    log_file: str
    options: tuple


def config_path(model: str, target: str) -> str:
    return osp.join(ROOT, 'configs', 'demo',
                    MODELS[model].format(target=TARGETS[target]) + '.py')


def run_name(model: str, target: str, seed: int) -> str:
    return f'{model}_{target}_seed{seed}'.lower()


def epoch_options(epochs: Optional[int]) -> List[str]:
    """``--cfg-options`` for a run of ``epochs`` epochs: the warm-up is a
    tenth of the run (the recipe's 3 of 30, at least one epoch) and the
    cosine takes the rest (the configs end it at ``max_epochs``)."""
    if epochs is None:
        return []
    if epochs < 2:
        raise SystemExit(
            f'--epochs {epochs}: a run needs at least 2 epochs (a warm-up '
            'epoch and a cosine one).')
    warmup = max(1, round(epochs * RECIPE_WARMUP / RECIPE_EPOCHS))
    return [f'train_cfg.max_epochs={epochs}',
            f'param_scheduler.0.end={warmup}',
            f'param_scheduler.1.begin={warmup}']


_ROW_NAME = re.compile(r'^[A-Za-z0-9+_.-]+$')
_ROW_KEYS = {'name', 'model', 'options', 'tlalign_options'}


def _option_list(value, what: str) -> tuple:
    if isinstance(value, str) or not all(
            isinstance(o, str) and '=' in o for o in value):
        raise SystemExit(f'{what} must be a list of "key=value" strings '
                         f'(as --cfg-options takes them), got {value!r}.')
    return tuple(value)


def read_variants(path: str) -> List[Row]:
    """The rows of a ``--variants`` file, checked: a clear error for a
    missing or unknown key, an unknown model, a repeated or unusable name,
    or an option that is not ``key=value``."""
    if not osp.isfile(path):
        raise SystemExit(f'--variants {path}: no such file.')
    variants = Config.fromfile(path).get('variants')
    if not variants:
        raise SystemExit(f'--variants {path} defines no `variants` list.')
    rows = []
    for i, v in enumerate(variants):
        where = f'--variants {path}, row {i}'
        unknown = set(v) - _ROW_KEYS
        if unknown or not {'name', 'model'} <= set(v):
            raise SystemExit(
                f'{where}: a row has keys {sorted(_ROW_KEYS)} (name and '
                f'model required), got {sorted(v)}.')
        if not isinstance(v['name'], str) or not _ROW_NAME.match(v['name']):
            raise SystemExit(f'{where}: name {v["name"]!r} must be letters, '
                             'digits and +-_. only (it names the run '
                             'folders).')
        if v['model'] not in MODELS:
            raise SystemExit(f'{where}: model {v["model"]!r} is not one of '
                             f'{list(MODELS)}.')
        rows.append(Row(v['name'], v['model'],
                        _option_list(v.get('options', ()),
                                     f'{where}: options'),
                        _option_list(v.get('tlalign_options', ()),
                                     f'{where}: tlalign_options')))
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise SystemExit(f'--variants {path} repeats a row name: {names}.')
    return rows


def grid_rows(args) -> List[Row]:
    """The rows to run: the ``--variants`` file's, or one per model."""
    if args.variants:
        return read_variants(args.variants)
    return [Row(model, model) for model in (args.models or DEFAULT_MODELS)]


def make_jobs(args, rows: Optional[List[Row]] = None) -> List[Job]:
    """Every (seed, row, target) run. A run of a row has the row's name as
    its ``model``, the row's model's config, and the row's options after
    the seed and the job-wide ones."""
    rows = grid_rows(args) if rows is None else rows
    jobs = []
    common = epoch_options(args.epochs) + list(args.cfg_options)
    for seed in args.seeds:
        for row in rows:
            for target in args.targets:
                name = run_name(row.name, target, seed)
                extra = row.options + (row.tlalign_options
                                       if target != BASELINE else ())
                jobs.append(Job(
                    len(jobs), row.name, target, seed,
                    config_path(row.model, target),
                    osp.join(args.work_dir, name),
                    osp.join(args.work_dir, f'{name}.log'),
                    tuple([f'randomness.seed={seed}'] + common) + extra))
    return jobs


# --- reading a run's results ------------------------------------------------


def read_scalars(work_dir: str) -> List[dict]:
    """The records of the newest run's ``vis_data/scalars.json``."""
    runs = sorted(d for d in os.listdir(work_dir)
                  if osp.isfile(osp.join(work_dir, d, 'vis_data',
                                         'scalars.json')))
    if not runs:
        raise RuntimeError(f'No training log under {work_dir}.')
    with open(osp.join(work_dir, runs[-1], 'vis_data', 'scalars.json')) as f:
        return [json.loads(line) for line in f]


def curves(records: List[dict]) -> dict:
    """Validation top-1 and the label-drift values per epoch, and the mean
    logged training loss per epoch."""
    val = {r['step']: r['accuracy/top1'] for r in records
           if 'accuracy/top1' in r}
    drift = {}
    for r in records:
        # LabelDriftHook's per-epoch means (step = epoch); the training
        # log's per-iteration label_drift/* are not read
        for key, value in r.items():
            if key.startswith('label_drift_epoch/'):
                drift.setdefault(key.split('/', 1)[1], {})[r['step']] = value
    loss = {}
    for r in records:
        if 'loss' in r and 'epoch' in r:
            loss.setdefault(r['epoch'], []).append(r['loss'])
    return dict(
        val_epochs=sorted(val), val_top1=[val[e] for e in sorted(val)],
        label_drift={k: dict(epochs=sorted(v), values=[v[e] for e in
                                                        sorted(v)])
                     for k, v in drift.items()},
        loss_epochs=sorted(loss),
        loss=[sum(loss[e]) / len(loss[e]) for e in sorted(loss)],
        iters=max((r['iter'] for r in records if 'iter' in r), default=0))


def cfg_options(options) -> dict:
    """``['key=value', ...]`` as ``tools/train.py --cfg-options`` reads
    them."""
    out = {}
    for option in options:
        key, value = option.split('=', 1)
        out[key] = DictAction._parse_iterable(value)
    return out


def final_checkpoint(work_dir: str) -> str:
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        path = f.read().strip()
    return path if osp.isabs(path) else osp.join(work_dir, path)


# --- the token-level number ----------------------------------------------


def label_shift(config: str, checkpoint: str, options=(), seed: int = 0,
                num_images: Optional[int] = None) -> dict:
    """How far TL-Align's label of a trained model is from the CutMix
    target, on the config's held-out (test) images mixed in pairs by CutMix
    (alpha 1, seeded: every checkpoint sees the same mixes), as source
    weights: ``mean_abs`` is the mean over images and sources of
    ``|w_aligned - w_area|`` (``|lambda_aligned - lambda_area|`` for two
    sources), ``rmse`` the paper's Fig. 3 number.

    The one place the analysis API is called: adapt here when it changes.
    """
    from tlalign_mm.analysis.label_rmse import label_rmse
    from tlalign_mm.analysis.mixed_batches import mixed_batches
    from tlalign_mm.analysis.session import (
        build_dataloader,
        build_model,
        load_config,
    )
    cfg = load_config(config, cfg_options(options))
    model = build_model(cfg, checkpoint)
    loader = build_dataloader(cfg, 'test')
    with torch.no_grad():
        result = label_rmse(model,
                            mixed_batches(model, loader, 'cutmix', 1.0, seed,
                                          num_images))
    return {k: result[k] for k in ('mean_abs', 'rmse', 'num_images')}


# --- one run, in a forked process ------------------------------------------

_TRAIN = None  # tools/train.py, imported once before forking
_PROGRESS = None  # a queue of (job index, epochs done)


def _import_train():
    spec = importlib.util.spec_from_file_location(
        'tlalign_mm_tools_train', osp.join(ROOT, 'tools', 'train.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _EpochProgress(Hook):
    """Tells the parent when an epoch ends."""

    def __init__(self, index, progress):
        self.index, self.progress = index, progress

    def after_train_epoch(self, runner):
        self.progress.put((self.index, runner.epoch + 1))


def _train(job: Job) -> None:
    """``tools/train.py`` in this process, with the progress hook added and
    the config's text left unformatted: mmengine formats a config with yapf
    each time it prints or dumps one, four times per run (the log, the work
    dir's copy, the visualizer's copy, the runtime info), about 0.15 s of
    CPU each; the text is the same Python without the layout."""
    train = _TRAIN
    build_runner = train.build_runner

    def build_with_progress(cfg):
        cfg = Config(cfg.to_dict(), cfg_text=cfg.text, filename=cfg.filename,
                     format_python_code=False)
        runner = build_runner(cfg)
        if _PROGRESS is not None:
            runner.register_hook(_EpochProgress(job.index, _PROGRESS),
                                 priority='LOWEST')
        return runner

    argv = sys.argv
    sys.argv = ['tools/train.py', job.config, '--work-dir', job.work_dir,
                '--cfg-options', *job.options]
    train.build_runner = build_with_progress
    try:
        train.main()
    finally:
        sys.argv, train.build_runner = argv, build_runner


def run_job(job: Job) -> dict:
    """Train one run, then read its results and measure its token-level
    number; the run's output goes to ``job.log_file``. Returns the run's
    record (also written to ``run.json`` in its work dir), or one with
    ``error`` set."""
    torch.set_num_threads(1)
    os.makedirs(job.work_dir, exist_ok=True)
    start = time.time()
    with open(job.log_file, 'w') as log:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            _train(job)
            train_s = time.time() - start
            record = dict(job._asdict(), train_s=train_s)
            # how to repeat this run bit for bit: same thread count
            record['threads'] = torch.get_num_threads()
            record['command'] = f'OMP_NUM_THREADS={record["threads"]} ' + \
                shlex.join(['python', 'tools/train.py',
                            osp.relpath(job.config, ROOT), '--work-dir',
                            job.work_dir, '--cfg-options', *job.options])
            record.update(curves(read_scalars(job.work_dir)))
            record['top1'] = record['val_top1'][-1]
            record['checkpoint'] = final_checkpoint(job.work_dir)
            record['label_shift'] = label_shift(
                job.config, record['checkpoint'], job.options)
            record['wall_s'] = time.time() - start
            usage = resource.getrusage(resource.RUSAGE_SELF)
            record['cpu_s'] = usage.ru_utime + usage.ru_stime
        except Exception:  # noqa: BLE001  (reported by the parent)
            traceback.print_exc()
            record = dict(job._asdict(), error=traceback.format_exc())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    with open(osp.join(job.work_dir, 'run.json'), 'w') as f:
        json.dump(record, f, indent=1)
    return record


# --- the parent: the pool, the progress bar --------------------------------


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f'{seconds // 60}m{seconds % 60:02d}s'


def paired_so_far(jobs: List[Job], records: Dict[int, dict]) -> str:
    """Each row's paired difference over the seeds finished so far (both
    targets of the seed done): mean and W/L/T, for the progress line."""
    acc: Dict[str, Dict[str, Dict[int, float]]] = {}
    for job in jobs:
        record = records.get(job.index, {})
        if 'top1' in record:
            acc.setdefault(job.model, {}).setdefault(
                job.target, {})[job.seed] = record['top1']
    parts = []
    for model, targets in acc.items():
        base = targets.get(BASELINE, {})
        for target, values in targets.items():
            seeds = sorted(set(base) & set(values))
            if target == BASELINE or not seeds:
                continue
            d = paired_difference({s: base[s] for s in seeds},
                                  {s: values[s] for s in seeds})
            parts.append(f'{model} {target} − {BASELINE} {d.mean:+.2f} '
                         f'W/L/T {d.wins}/{d.losses}/{d.ties}')
    return '; '.join(parts)


class ProgressLine:
    """tqdm over the epochs of all runs (so the ETA moves within runs),
    with the paired difference so far after it; redrawn in place on a
    terminal, printed as a line when a run ends otherwise (a log)."""

    def __init__(self, jobs: List[Job], epochs_per_run: int):
        from tqdm import tqdm
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
        self.epochs: Dict[int, int] = {}

    def update(self, index: int, epochs: int) -> None:
        epochs = min(max(epochs, self.epochs.get(index, 0)),
                     self.epochs_per_run)
        self.bar.update(epochs - self.epochs.get(index, 0))
        self.epochs[index] = epochs

    def finish_run(self, records: Dict[int, dict], index: int) -> None:
        self.update(index, self.epochs_per_run)
        self.bar.set_description_str(f'{len(records)}/{len(self.jobs)} runs')
        self.bar.set_postfix_str(paired_so_far(self.jobs, records))
        if not self.tty:
            print(self.bar, flush=True)

    def close(self) -> None:
        self.bar.close()


def _read_record(job: Job, exitcode: int) -> dict:
    path = osp.join(job.work_dir, 'run.json')
    if exitcode == 0 and osp.isfile(path):
        with open(path) as f:
            return json.load(f)
    return dict(job._asdict(), error=(
        f'the run\'s process ended with exit code {exitcode} before writing '
        f'its results (killed, or out of memory?); see {job.log_file}'))


def run_all(jobs: List[Job], num_procs: int, epochs_per_run: int,
            quiet: bool = False) -> List[dict]:
    """Run ``jobs`` in processes forked from this one, ``num_procs`` at a
    time, a fresh process for each (no state carries over between runs).
    A run that fails, or whose process dies, comes back with ``error``."""
    global _TRAIN, _PROGRESS
    if _TRAIN is None:
        _TRAIN = _import_train()
    # the digits, read once here (Digits caches them) for every forked run
    from tlalign_mm.datasets import Digits
    Digits(split='test')
    ctx = multiprocessing.get_context('fork')
    _PROGRESS = ctx.Queue()
    bar = None if quiet else ProgressLine(jobs, epochs_per_run)
    waiting, running, records = list(jobs), {}, {}
    try:
        while waiting or running:
            while waiting and len(running) < num_procs:
                job = waiting.pop(0)
                os.makedirs(job.work_dir, exist_ok=True)
                stale = osp.join(job.work_dir, 'run.json')
                if osp.exists(stale):
                    os.remove(stale)
                proc = ctx.Process(target=run_job, args=(job, ))
                proc.start()
                running[job.index] = (job, proc)
            try:
                index, epoch = _PROGRESS.get(timeout=0.5)
                if bar is not None:
                    bar.update(index, epoch)
            except queue_lib.Empty:
                pass
            for index, (job, proc) in list(running.items()):
                if proc.exitcode is None:
                    continue
                proc.join()
                del running[index]
                records[index] = _read_record(job, proc.exitcode)
                if bar is not None:
                    bar.finish_run(records, index)
    finally:
        for _, proc in running.values():  # interrupted: stop the others
            proc.terminate()
        _PROGRESS = None
        if bar is not None:
            bar.close()
    return [records[job.index] for job in jobs]


# --- statistics and outputs -----------------------------------------------


def early_epoch(records: List[dict]) -> Optional[int]:
    """The validated epoch nearest a third of the run (10 of 30), where the
    issue saw TL-Align lag; None when it is the last one."""
    epochs = set.intersection(*(set(r['val_epochs']) for r in records))
    if not epochs:
        return None
    last = max(epochs)
    early = min(sorted(epochs), key=lambda e: abs(e - last / 3))
    return None if early == last else early


def summarize(records: List[dict], models: List[str],
              targets: List[str]) -> dict:
    """Per model: each target's mean +- std, the paired difference of each
    other target against the baseline (CutMix), at the end and a third of
    the way through (``paired_early``), and the token-level number."""
    out = {}
    for model in models:
        acc = {t: {r['seed']: r['top1'] for r in records
                   if r['model'] == model and r['target'] == t}
               for t in targets}
        entry = dict(targets={t: spread(list(v.values()))._asdict()
                              for t, v in acc.items() if v})
        if BASELINE in acc:
            entry['paired'] = {
                t: paired_difference(acc[BASELINE], acc[t]).to_dict()
                for t in targets if t != BASELINE and acc[t]}
            early = early_epoch(records)
            if early is not None:
                at = {t: {r['seed']: r['val_top1'][r['val_epochs'].index(
                    early)] for r in records
                          if r['model'] == model and r['target'] == t}
                      for t in targets}
                entry['paired_early'] = {
                    t: dict(paired_difference(at[BASELINE], at[t]).to_dict(),
                            epoch=early)
                    for t in targets if t != BASELINE and at[t]}
        entry['label_shift'] = {
            t: spread([r['label_shift']['mean_abs'] for r in records
                       if r['model'] == model and r['target'] == t
                       ])._asdict()
            for t in targets if acc[t]}
        out[model] = entry
    return out


def _pm(mean, std, digits=2):
    if std != std:  # one seed
        return f'{mean:.{digits}f}'
    return f'{mean:.{digits}f} ± {std:.{digits}f}'


def _ci(d):
    low, high = d['ci']
    if low != low:
        return f'{d["mean"]:+.2f}'
    return f'{d["mean"]:+.2f} [{low:+.2f}, {high:+.2f}]'


def markdown(summary: dict, records: List[dict], targets: List[str],
             meta: dict) -> str:
    """The results table, the per-seed table and the run times."""
    others = [t for t in targets if t != BASELINE]
    lines = [
        f'Held-out top-1 (%) on scikit-learn\'s digits (360 test images), '
        f'{meta["epochs"]} epochs, seeds {meta["seeds"]}: mean ± std over '
        f'seeds; difference per seed (same seed: same initial weights, data '
        f'order and mixes), mean and 95% CI by paired t; W/L/T: seeds the '
        f'target won, lost, tied against {BASELINE}; p: two-sided, of the '
        f'paired t-test and of the Wilcoxon signed-rank test (tied seeds '
        f'dropped); label shift: mean '
        '|aligned − CutMix| label (source weights) of the trained '
        'checkpoints on held-out CutMix pairs.', '']
    head = ['model'] + [f'{t} top-1' for t in targets]
    early = {e['paired_early'][t]['epoch'] for e in summary.values()
             for t in e.get('paired_early', {})}
    for t in others:
        head += [f'{t} − {BASELINE} (95% CI)', 'W/L/T',
                 'p (paired t / Wilcoxon)']
        head += [f'same, at epoch {e}' for e in early]
    head += [f'label shift, {t}' for t in targets]
    lines += ['| ' + ' | '.join(head) + ' |',
              '|' + '---|' * len(head)]
    for model, entry in summary.items():
        row = [model]
        row += [_pm(entry['targets'][t]['mean'], entry['targets'][t]['std'])
                for t in targets]
        for t in others:
            d = entry['paired'][t]
            row += [_ci(d), f'{d["wins"]}/{d["losses"]}/{d["ties"]}',
                    f'{d["p_value"]:.3f} / {d["wilcoxon_p"]:.3f}']
            if early:
                d = entry['paired_early'][t]
                row += [f'{_ci(d)}, {d["wins"]}/{d["losses"]}/{d["ties"]}']
        row += [_pm(entry['label_shift'][t]['mean'],
                    entry['label_shift'][t]['std'], 4) for t in targets]
        lines.append('| ' + ' | '.join(row) + ' |')
    lines += ['', 'Per seed (top-1 %, train time s):', '',
              '| model | seed | ' + ' | '.join(targets) + ' |',
              '|---|---|' + '---|' * len(targets)]
    by_key = {(r['model'], r['target'], r['seed']): r for r in records}
    for model in summary:
        for seed in meta['seeds']:
            cells = []
            for t in targets:
                r = by_key.get((model, t, seed))
                cells.append('' if r is None else
                             f'{r["top1"]:.2f} ({r["train_s"]:.0f} s)')
            lines.append(f'| {model} | {seed} | ' + ' | '.join(cells) + ' |')
    lines += ['', f'Wall time {_duration(meta["wall_s"])} for '
              f'{len(records)} runs, {meta["jobs"]} at a time, one thread '
              f'each ({meta["machine"]}).', '']
    return '\n'.join(lines)


def per_run_line(records: List[dict], jobs: int) -> str:
    """The runs' mean wall time and training time per iteration, to predict
    the job's time on another machine."""
    wall = sum(r['wall_s'] for r in records) / len(records)
    per_iter = [r['train_s'] / r['iters'] for r in records if r.get('iters')]
    line = f'Per run: {wall:.1f} s on average ({jobs} at a time, one thread'
    if per_iter:
        line += (f'; training {1e3 * sum(per_iter) / len(per_iter):.1f} ms '
                 'per iteration, validation and hooks included')
    return line + ').'


def write_outputs(work_dir: str, records: List[dict], models, targets,
                  meta: dict) -> dict:
    summary = summarize(records, models, targets)
    accuracy, val_curves, titles = {}, {}, {}
    for model in models:
        accuracy[model] = {
            t: {r['seed']: r['top1'] for r in records
                if r['model'] == model and r['target'] == t}
            for t in targets}
        val_curves[model] = {}
        for t in targets:
            runs = [r for r in records
                    if r['model'] == model and r['target'] == t]
            if runs:
                val_curves[model][t] = (runs[0]['val_epochs'],
                                        [r['val_top1'] for r in runs])
        titles[model] = model + ''.join(
            f'\n{t} − {BASELINE}: {_ci(d)}, W/L/T '
            f'{d["wins"]}/{d["losses"]}/{d["ties"]}'
            for t, d in summary[model].get('paired', {}).items())
    png = figures.seed_comparison(accuracy, val_curves,
                                  osp.join(work_dir, 'summary.png'),
                                  titles=titles)
    md = markdown(summary, records, targets, meta)
    with open(osp.join(work_dir, 'summary.md'), 'w') as f:
        f.write(md)
    with open(osp.join(work_dir, 'summary.json'), 'w') as f:
        json.dump(dict(meta, models=summary, runs=records), f, indent=1)
    return dict(summary=summary, markdown=md, png=png)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            names = [line.split(':', 1)[1].strip() for line in f
                     if line.startswith('model name')]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f'{cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__}'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--seeds', type=int, nargs='+',
                        default=list(range(DEFAULT_SEEDS)),
                        help=f'seeds (default: 0..{DEFAULT_SEEDS - 1})')
    parser.add_argument('--models', nargs='+', choices=list(MODELS),
                        default=None,
                        help=f'default: {" ".join(DEFAULT_MODELS)}')
    parser.add_argument('--targets', nargs='+', choices=list(TARGETS),
                        default=list(TARGETS))
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
        help=f'train this many epochs instead of {RECIPE_EPOCHS} (the '
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
    rows = grid_rows(args)
    names = [row.name for row in rows]
    jobs = make_jobs(args, rows)
    epochs = args.epochs or RECIPE_EPOCHS
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
            with open(path) as f:
                records.append(json.load(f))
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
    wall = time.time() - start
    if args.summarize:
        with open(osp.join(args.work_dir, 'summary.json')) as f:
            meta = {k: v for k, v in json.load(f).items()
                    if k not in ('models', 'runs')}
    else:
        meta = dict(command=' '.join(['tools/run_demo.py'] +
                                     (argv if argv is not None
                                      else sys.argv[1:])),
                    epochs=epochs, seeds=list(args.seeds), jobs=args.jobs,
                    wall_s=wall, machine=machine())
        if args.variants:
            meta['variants'] = [row._asdict() for row in rows]
    out = write_outputs(args.work_dir, records, names, args.targets,
                        meta)
    print('\n' + out['markdown'])
    print('Per-run wall time (s): ' + ', '.join(
        f'{r["model"]} {r["target"]} {r["seed"]}: {r["wall_s"]:.0f}'
        for r in records))
    print(per_run_line(records, meta['jobs']))
    print(f'Wrote {args.work_dir}/summary.json, summary.md, summary.png; '
          f'job wall time {_duration(meta["wall_s"])}.')
    return out


if __name__ == '__main__':
    main()
