"""The main job (``tools/run_demo.py``): CutMix vs TL-Align on real data
that ships with scikit-learn, over several seeds, with paired statistics.

The job trains the demo configs (``configs/demo/``: a tiny ViT and its
SL-ViT twin, with Shifted Patch Tokenization and Locality Self-Attention,
from scratch on the handwritten digits) with CutMix and with TL-Align, on
every seed. Runs with the same seed share the initial weights, the data
order and the mixing draws, so the per-seed difference isolates the target.

- what runs: :class:`Row` (a model and its overrides; :func:`read_variants`
  reads a grid of them), :class:`Job` (one run), :func:`make_jobs`;
- one run: :func:`run_job` (``tools/train.py``'s runner,
  :func:`~tlalign_mm.apis.train.build_train_runner`, then the run's
  results and its token-level number, :func:`label_shift`);
- the results: :func:`summarize` (mean +- std, the paired difference with
  its 95% interval, wins/losses/ties), :func:`markdown`,
  :func:`write_outputs` (``summary.json``, ``summary.md``,
  ``summary.png``).
"""
import json
import os
import os.path as osp
import platform
import re
import resource
import shlex
import sys
import time
import traceback
from typing import Dict, List, NamedTuple, Optional, Sequence

import mmengine
import torch
from mmengine.config import Config, DictAction
from prettytable import PrettyTable, TableStyle
from tqdm import tqdm

from tlalign_mm.analysis import figures
from tlalign_mm.analysis.paired_stats import paired_difference, spread

from .train import build_train_runner, parse_train_args

#: the checkout (``configs/demo`` beside ``tlalign_mm/``)
ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
MODELS = {'ViT': 'vit-tiny-p4', 'SL-ViT': 'sl-vit-tiny-p4'}
TARGETS = {'CutMix': 'cutmix', 'TL-Align': 'tlalign'}
BASELINE = 'CutMix'
# Twenty seeds per cell: five left a half-point effect undecided (issue 25);
# the job's time on two idle cores is in the README (Results).
DEFAULT_SEEDS = 20
RECIPE_EPOCHS, RECIPE_WARMUP = 30, 3


class Row(NamedTuple):
    """One row of the grid: a demo model and the overrides that make the
    row (``tools/run_demo.py --variants``)."""
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
                    f'{MODELS[model]}_1xb64-{TARGETS[target]}_digits.py')


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


def make_jobs(rows: Sequence[Row], targets: Sequence[str],
              seeds: Sequence[int], work_dir: str,
              epochs: Optional[int] = None,
              cfg_options: Sequence[str] = ()) -> List[Job]:
    """Every (seed, row, target) run. A run of a row has the row's name as
    its ``model``, the row's model's config, and the row's options after
    the seed and the job-wide ones (``epochs``, ``cfg_options``)."""
    jobs = []
    common = epoch_options(epochs) + list(cfg_options)
    for seed in seeds:
        for row in rows:
            for target in targets:
                name = run_name(row.name, target, seed)
                extra = row.options + (row.tlalign_options
                                       if target != BASELINE else ())
                jobs.append(Job(
                    len(jobs), row.name, target, seed,
                    config_path(row.model, target),
                    osp.join(work_dir, name),
                    osp.join(work_dir, f'{name}.log'),
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


# --- one run --------------------------------------------------------------


def train_job(job: Job, hooks: Sequence = ()):
    """``tools/train.py CONFIG --work-dir DIR --cfg-options ...`` of
    ``job`` in this process, with ``hooks`` added (lowest priority) and
    the config's text left unformatted (mmengine formats it with yapf
    four times per run, about 0.15 s of CPU each; the same Python). Returns
    the runner, trained."""
    runner = build_train_runner(parse_train_args(
        [job.config, '--work-dir', job.work_dir, '--cfg-options',
         *job.options]), format_python_code=False)
    for hook in hooks:
        runner.register_hook(hook, priority='LOWEST')
    runner.train()
    return runner


def run_job(job: Job, hooks: Sequence = ()) -> dict:
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
            train_job(job, hooks)
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
    mmengine.dump(record, osp.join(job.work_dir, 'run.json'), indent=1)
    return record


def read_record(job: Job, exitcode: int) -> dict:
    """The ``run.json`` a finished run wrote, or an error record naming its
    process's exit code."""
    path = osp.join(job.work_dir, 'run.json')
    if exitcode == 0 and osp.isfile(path):
        return mmengine.load(path)
    return dict(job._asdict(), error=(
        f'the run\'s process ended with exit code {exitcode} before writing '
        f'its results (killed, or out of memory?); see {job.log_file}'))


# --- statistics and outputs -----------------------------------------------


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


def markdown_table(head: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table (prettytable's), cells left-aligned."""
    table = PrettyTable(list(head))
    table.add_rows([list(row) for row in rows])
    table.set_style(TableStyle.MARKDOWN)
    table.align = 'l'
    return table.get_string()


def duration(seconds: float) -> str:
    return tqdm.format_interval(seconds)


def markdown(summary: dict, records: List[dict], targets: List[str],
             meta: dict) -> str:
    """The results table, the per-seed table and the run times."""
    others = [t for t in targets if t != BASELINE]
    intro = (
        f'Held-out top-1 (%) on scikit-learn\'s digits (360 test images), '
        f'{meta["epochs"]} epochs, seeds {meta["seeds"]}: mean ± std over '
        f'seeds; difference per seed (same seed: same initial weights, data '
        f'order and mixes), mean and 95% CI by paired t; W/L/T: seeds the '
        f'target won, lost, tied against {BASELINE}; p: two-sided, of the '
        f'paired t-test and of the Wilcoxon signed-rank test (tied seeds '
        f'dropped); label shift: mean '
        '|aligned − CutMix| label (source weights) of the trained '
        'checkpoints on held-out CutMix pairs.')
    head = ['model'] + [f'{t} top-1' for t in targets]
    early = {e['paired_early'][t]['epoch'] for e in summary.values()
             for t in e.get('paired_early', {})}
    for t in others:
        head += [f'{t} − {BASELINE} (95% CI)', 'W/L/T',
                 'p (paired t / Wilcoxon)']
        head += [f'same, at epoch {e}' for e in early]
    head += [f'label shift, {t}' for t in targets]
    rows = []
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
        rows.append(row)
    by_key = {(r['model'], r['target'], r['seed']): r for r in records}
    per_seed = []
    for model in summary:
        for seed in meta['seeds']:
            cells = [by_key.get((model, t, seed)) for t in targets]
            per_seed.append([model, seed] + [
                '' if r is None else f'{r["top1"]:.2f} ({r["train_s"]:.0f} s)'
                for r in cells])
    return '\n'.join([
        intro, '', markdown_table(head, rows), '',
        'Per seed (top-1 %, train time s):', '',
        markdown_table(['model', 'seed', *targets], per_seed), '',
        f'Wall time {duration(meta["wall_s"])} for {len(records)} runs, '
        f'{meta["jobs"]} at a time, one thread each ({meta["machine"]}).',
        ''])


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
    """``summary.png``, ``summary.md`` and ``summary.json`` of the runs."""
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
    mmengine.dump(dict(meta, models=summary, runs=records),
                  osp.join(work_dir, 'summary.json'), indent=1)
    return dict(summary=summary, markdown=md, png=png)


def machine() -> str:
    """The CPU's model name, the logical CPUs and torch's version (what
    :func:`mmengine.utils.dl_utils.collect_env` does not name)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as f:
            names = [line.split(':', 1)[1].strip() for line in f
                     if line.startswith('model name')]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f'{cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__}'
