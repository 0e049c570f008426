"""The main job (``tools/run_demo.py``): CutMix vs TL-Align on real data
that ships with scikit-learn, over several seeds, with paired statistics.

The job trains the demo configs (``configs/demo/``: a tiny ViT and its
SL-ViT twin, with Shifted Patch Tokenization and Locality Self-Attention,
from scratch on the handwritten digits) with CutMix and with TL-Align, on
every seed. Runs with the same seed share the initial weights, the data
order and the mixing draws, so the per-seed difference isolates the target.
What it trains by default and with ``--full``, and where the recorded full
evidence is, is ``configs/demo/main_job.yml`` (:data:`SPEC`).

- what runs: :class:`Row` (a model and its overrides; :func:`read_variants`
  reads a grid of them), :class:`Job` (one run), :func:`make_jobs`;
- before it runs: :func:`check_and_time` (each kind of run's config merged
  and checked as ``tools/train.py`` would, and a few of its training steps
  timed, in a child process), :func:`estimate` (the job's time here);
- one run: :func:`run_job` (``tools/train.py``'s runner,
  :func:`~tlalign_mm.apis.train.build_train_runner`, then the run's
  results and its token-level number, :func:`label_shift`); each run's
  ``run.json`` records the settings it ran with;
- reading runs back: :func:`find_runs` (a work dir's runs),
  :func:`check_one_pass` (refuses runs of different settings);
- the results: :func:`summarize` (mean +- std, the paired difference with
  its 95% interval, wins/losses/ties), :func:`markdown`,
  :func:`write_outputs` (``summary.json``, ``summary.md``,
  ``summary.png``), beside the recorded full evidence
  (:func:`read_recorded`, :func:`recorded_rows`, :func:`write_recorded`).
"""
import functools
import glob
import hashlib
import json
import math
import multiprocessing
import os
import os.path as osp
import platform
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Dict, List, NamedTuple, Optional, Sequence

import mmengine
import torch
import yaml
from mmengine.config import Config, DictAction
from mmengine.hooks import Hook
from prettytable import PrettyTable, TableStyle

from tlalign_mm.analysis import figures
from tlalign_mm.analysis.paired_stats import paired_difference, spread
from tlalign_mm_cli import ConfigError

from .train import (
    build_train_runner,
    check_train_config,
    merge_train_args,
    parse_train_args,
)

#: the checkout (``configs/demo`` beside ``tlalign_mm/``)
ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEMO_CONFIGS = osp.join(ROOT, 'configs', 'demo')
SPEC_FILE = osp.join(DEMO_CONFIGS, 'main_job.yml')


class JobError(Exception):
    """A mistake in what the job was asked to do, found before anything
    runs (or, for ``--summarize``, before anything is written); the tool
    prints it as one ``error:`` line."""


def read_spec(path: str = SPEC_FILE) -> dict:
    """``configs/demo/main_job.yml``: the targets, the models (config pairs
    and their options), the default and the full job, and the recorded
    full evidence's file. (Each model's recipe, its length and warm-up, is
    its configs': :func:`recipe`.)"""
    with open(path) as f:
        spec = yaml.safe_load(f)
    for model in spec['models'].values():
        model.setdefault('options', [])
        model.setdefault('tlalign_options', [])
    return spec


#: ``configs/demo/main_job.yml``
SPEC = read_spec()
#: target name -> its tag in the config file names; the first is the
#: baseline
TARGETS: Dict[str, str] = SPEC['targets']
BASELINE = next(iter(TARGETS))
#: model name -> ``dict(config, options, tlalign_options)``
MODELS: Dict[str, dict] = SPEC['models']
#: ``tools/run_demo.py``: models and number of seeds (0, 1, ...)
DEFAULT = SPEC['default']
#: ``tools/run_demo.py --full``
FULL = SPEC['full']
RECORDED = osp.join(DEMO_CONFIGS, SPEC['recorded'])
#: A run's wall time in training steps (:func:`time_steps`: data, mixing,
#: forward, backward, optimizer): its iterations times RUN_OVER_STEP (the
#: hooks) plus RUN_FIXED_STEPS (the validations, the runner's set-up, the
#: checkpoint, the label shift: 2.1-2.4 s of steps of about 55 ms). From
#: docs/performance.md's profile of the four demo runs on two idle cores
#: (iteration / (bare step + data + mixing): 1.03-1.05).
RUN_OVER_STEP, RUN_FIXED_STEPS = 1.04, 40


class Row(NamedTuple):
    """One row of the grid: a demo model and the overrides that make the
    row (``tools/run_demo.py --variants``)."""
    name: str
    model: str
    options: tuple = ()
    tlalign_options: tuple = ()


class Job(NamedTuple):
    """One run: ``options`` are its ``--cfg-options``: the seed, then the
    ``job_options`` (``--epochs``, scaled to the run's recipe, then
    ``--cfg-options``), then the model's and the row's own. ``epochs``: the
    run's length; ``code``: the version of the code
    (:func:`code_version`)."""
    index: int
    model: str
    target: str
    seed: int
    config: str
    work_dir: str
    log_file: str
    options: tuple
    epochs: int
    job_options: tuple = ()
    code: Optional[str] = None


def config_path(model: str, target: str) -> str:
    return osp.join(DEMO_CONFIGS, MODELS[model]['config'].format(
        target=TARGETS[target]))


def run_name(model: str, target: str, seed: int) -> str:
    return f'{model}_{target}_seed{seed}'.lower()


def default_rows(models: Optional[Sequence[str]] = None,
                 full: bool = False) -> List[Row]:
    """The rows of the named ``models``, else of the default (or full)
    job's."""
    names = models or (FULL if full else DEFAULT)['models']
    return [Row(name, name) for name in names]


def default_seeds(full: bool = False) -> List[int]:
    return list(range((FULL if full else DEFAULT)['seeds']))


class Recipe(NamedTuple):
    """A config's length and warm-up in epochs (``warmup`` None where its
    schedule is not a warm-up then a cosine from its end)."""
    epochs: int
    warmup: Optional[int]


@functools.lru_cache(maxsize=None)
def recipe(config: str, options: tuple = ()) -> Recipe:
    """The recipe of ``config`` with ``options`` (a model's and a row's own
    ``--cfg-options``) merged: ``train_cfg.max_epochs``, and the warm-up,
    the end of ``param_scheduler[0]`` where ``param_scheduler[1]`` (the
    cosine) begins: what ``--epochs`` rescales (:func:`epoch_options`).
    Each model runs its own recipe: the digits' 30 epochs, the canvas' 60."""
    cfg = Config.fromfile(config, format_python_code=False)
    if options:
        cfg.merge_from_dict(cfg_options(options))
    epochs = cfg.get('train_cfg', {}).get('max_epochs')
    if not isinstance(epochs, int):
        raise JobError(f'{osp.relpath(config, ROOT)} has no '
                       'train_cfg.max_epochs: the job runs by epochs.')
    sched = cfg.get('param_scheduler')
    warmup = None
    if isinstance(sched, (list, tuple)) and len(sched) == 2 and all(
            isinstance(s, dict) for s in sched) and sched[0].get(
                'end') is not None and sched[0]['end'] == sched[1].get(
                    'begin'):
        warmup = sched[0]['end']
    return Recipe(epochs, warmup)


def epoch_options(epochs: Optional[int], of: Recipe) -> List[str]:
    """``--cfg-options`` for a run of ``epochs`` epochs instead of the
    recipe ``of``'s: the warm-up keeps its share of the run (the digits'
    3 of 30, the canvas' 6 of 60: a tenth; at least one epoch) and the
    cosine takes the rest (the configs end it at ``max_epochs``)."""
    if epochs is None:
        return []
    if epochs < 2:
        raise JobError(
            f'--epochs {epochs}: a run needs at least 2 epochs (a warm-up '
            'epoch and a cosine one).')
    if of.warmup is None:
        raise JobError(
            f'--epochs {epochs}: a config\'s schedule is not a warm-up '
            '(param_scheduler.0) then a cosine from its end '
            '(param_scheduler.1), which --epochs rescales; set '
            'train_cfg.max_epochs and the schedule with --cfg-options.')
    warmup = max(1, round(epochs * of.warmup / of.epochs))
    return [f'train_cfg.max_epochs={epochs}',
            f'param_scheduler.0.end={warmup}',
            f'param_scheduler.1.begin={warmup}']


_ROW_NAME = re.compile(r'^[A-Za-z0-9+_.-]+$')
_ROW_KEYS = {'name', 'model', 'options', 'tlalign_options'}


def _option_list(value, what: str) -> tuple:
    if isinstance(value, str) or not all(
            isinstance(o, str) and '=' in o for o in value):
        raise JobError(f'{what} must be a list of "key=value" strings '
                       f'(as --cfg-options takes them), got {value!r}.')
    return tuple(value)


def read_variants(path: str) -> List[Row]:
    """The rows of a ``--variants`` file, checked: a clear error for a
    missing or unknown key, an unknown model, a repeated or unusable name,
    or an option that is not ``key=value``."""
    if not osp.isfile(path):
        raise JobError(f'--variants {path}: no such file.')
    try:
        variants = Config.fromfile(path).get('variants')
    except Exception as error:  # noqa: BLE001  (mmengine's, any kind)
        raise JobError(f'--variants {path} cannot be read: {error}') \
            from None
    if not variants:
        raise JobError(f'--variants {path} defines no `variants` list.')
    rows = []
    for i, v in enumerate(variants):
        where = f'--variants {path}, row {i}'
        unknown = set(v) - _ROW_KEYS
        if unknown or not {'name', 'model'} <= set(v):
            raise JobError(
                f'{where}: a row has keys {sorted(_ROW_KEYS)} (name and '
                f'model required), got {sorted(v)}.')
        if not isinstance(v['name'], str) or not _ROW_NAME.match(v['name']):
            raise JobError(f'{where}: name {v["name"]!r} must be letters, '
                           'digits and +-_. only (it names the run '
                           'folders).')
        if v['model'] not in MODELS:
            raise JobError(f'{where}: model {v["model"]!r} is not one of '
                           f'{list(MODELS)}.')
        rows.append(Row(v['name'], v['model'],
                        _option_list(v.get('options', ()),
                                     f'{where}: options'),
                        _option_list(v.get('tlalign_options', ()),
                                     f'{where}: tlalign_options')))
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise JobError(f'--variants {path} repeats a row name: {names}.')
    return rows


def run_epochs(options: Sequence[str], of: Recipe) -> int:
    """How many epochs a run of ``options`` (all its ``--cfg-options``, the
    last one that sets it counts) and of the recipe ``of`` trains."""
    for option in reversed(list(options)):
        if option.startswith('train_cfg.max_epochs='):
            return int(option.split('=', 1)[1])
    return of.epochs


def run_lengths(runs: Sequence) -> object:
    """The runs' (jobs' or records') length: one number where they agree,
    else ``{model: epochs}``."""
    lengths = {}
    for run in runs:
        run = run._asdict() if hasattr(run, '_asdict') else run
        epochs = run.get('epochs') or max(run.get('loss_epochs') or [0])
        lengths.setdefault(run['model'], epochs)
    values = set(lengths.values())
    return values.pop() if len(values) == 1 else lengths


def epochs_text(lengths) -> str:
    """:func:`run_lengths` in words: ``30 epochs``, or ``epochs: SL-ViT
    30, ViT-c24 60``."""
    if isinstance(lengths, dict):
        return 'epochs: ' + ', '.join(f'{m} {e}' for m, e in lengths.items())
    return f'{lengths} epochs'


def code_version() -> str:
    """The checkout's commit, with a digest of its uncommitted changes to
    the code and configs a run reads (``tlalign_mm/``, ``configs/``); the
    package's version where there is no git checkout."""
    def git(*args):
        return subprocess.run(['git', '-C', ROOT, *args], check=True,
                              capture_output=True, text=True).stdout
    try:
        commit = git('rev-parse', '--short=12', 'HEAD').strip()
        changes = git('diff', 'HEAD', '--', 'tlalign_mm', 'configs')
    except (OSError, subprocess.CalledProcessError):
        from tlalign_mm import __version__
        return f'tlalign_mm {__version__}'
    if not changes:
        return commit
    return f'{commit}+changes-{hashlib.sha1(changes.encode()).hexdigest()[:8]}'


def make_jobs(rows: Sequence[Row], targets: Sequence[str],
              seeds: Sequence[int], work_dir: str,
              epochs: Optional[int] = None,
              cfg_options: Sequence[str] = (),
              code: Optional[str] = None) -> List[Job]:
    """Every (seed, row, target) run. A run of a row has the row's name as
    its ``model``, the row's model's config, and after the seed the
    job-wide options (``epochs``, scaled to the recipe of the config with
    the model's and the row's options (:func:`recipe`), and
    ``cfg_options``), then the model's own and the row's. Without
    ``epochs`` each runs its recipe's length."""
    jobs = []
    for seed in seeds:
        for row in rows:
            model = MODELS[row.model]
            for target in targets:
                name = run_name(row.name, target, seed)
                extra = (*model['options'], *row.options)
                if target != BASELINE:
                    extra += (*model['tlalign_options'],
                              *row.tlalign_options)
                config = config_path(row.model, target)
                of = recipe(config, extra)
                job_options = tuple(epoch_options(epochs, of) +
                                    list(cfg_options))
                jobs.append(Job(
                    len(jobs), row.name, target, seed, config,
                    osp.join(work_dir, name),
                    osp.join(work_dir, f'{name}.log'),
                    (f'randomness.seed={seed}', *job_options, *extra),
                    run_epochs((*job_options, *extra), of), job_options,
                    code))
    return jobs


# --- before the runs: the configs checked, a few steps timed -----------------


def train_config(job: Job, work_dir: Optional[str] = None) -> Config:
    """The config ``tools/train.py`` would train for ``job`` (merged and
    checked, nothing built), with ``work_dir`` in place of the job's."""
    args = parse_train_args([job.config, '--work-dir',
                             work_dir or job.work_dir, '--cfg-options',
                             *job.options])
    cfg = Config.fromfile(job.config, format_python_code=False)
    cfg = merge_train_args(cfg, args)
    check_train_config(cfg)
    return cfg


def time_steps(job: Job, steps: int = 8, barrier=None) -> dict:
    """``job``'s config merged and checked as ``tools/train.py`` does; then
    its model, optimizer and training data built, and ``steps`` training
    steps timed (``model.train_step``, as the runner's loop calls it: the
    batch, the mixing, forward, loss, backward, the optimizer) after two
    untimed, from when every process at ``barrier`` is ready. Returns
    seconds per step and the iterations per epoch."""
    from mmengine.logging import MMLogger
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from mmengine.runner import Runner

    from tlalign_mm.analysis.session import build_model
    with tempfile.TemporaryDirectory() as tmp:
        cfg = train_config(job, tmp)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    MMLogger.get_instance(f'tlalign_demo_timing_{id(cfg)}',
                          log_level='WARNING')
    model = build_model(cfg, seed=job.seed).train()
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    loader = Runner.build_dataloader(cfg.train_dataloader, seed=job.seed)
    batches = (batch for _ in range(steps + 2) for batch in loader)
    for _ in range(2):
        model.train_step(next(batches), optim_wrapper)
    if barrier is not None:
        barrier.wait()
    start = time.perf_counter()
    for _ in range(steps):
        model.train_step(next(batches), optim_wrapper)
    return dict(step_s=(time.perf_counter() - start) / steps,
                iters_per_epoch=len(loader))


def in_children(calls: Sequence[tuple]) -> List[tuple]:
    """``fn(*args)`` of each ``(fn, *args)`` in ``calls``, each in its own
    process forked from this one, all at once (what they build and seed
    stays there). Returns ``(True, result)`` or ``(False, its error)`` (the
    traceback too where ``TLALIGN_DEBUG=1``) of each."""
    ctx = multiprocessing.get_context('fork')
    procs = []

    def child(send, fn, *args):
        torch.set_num_threads(1)
        try:
            send.send((True, fn(*args)))
        except BaseException as error:  # noqa: BLE001  (sent to the parent)
            message = str(error) or type(error).__name__
            if os.environ.get('TLALIGN_DEBUG') == '1':
                message += '\n' + traceback.format_exc()
            send.send((False, message))

    for call in calls:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=child, args=(send, *call))
        proc.start()
        send.close()
        procs.append((proc, receive))
    results = []
    for proc, receive in procs:
        try:
            results.append(receive.recv())
        except EOFError:
            results.append((False, 'its process ended before it answered'))
        proc.join()
    return results


_ANOTHER = 'another timing failed'


def _timed(job: Job, steps: int, barrier) -> dict:
    try:
        return time_steps(job, steps, barrier)
    except threading.BrokenBarrierError:
        raise JobError(_ANOTHER) from None
    except Exception as error:  # noqa: BLE001  (one line, named)
        barrier.abort()  # the others stop waiting
        options = ' '.join(job.options[1:])
        # a ConfigError says what is wrong in words; others name their type
        kind = '' if isinstance(error, ConfigError) else \
            f'{type(error).__name__}: '
        raise JobError(
            f'{job.model} {job.target} ({osp.relpath(job.config)}'
            f'{" --cfg-options " + options if options else ""}): '
            f'{kind}{error}') from None


def check_and_time(jobs: Sequence[Job], num_procs: int = 1,
                   steps: int = 8) -> Dict[tuple, float]:
    """Before any run: each kind of run in ``jobs`` (a model and target)
    merged and checked as ``tools/train.py`` would, and built and timed
    (:func:`time_steps`), ``num_procs`` side by side as the runs will go
    (each in a forked child process). A config that fails raises
    :class:`JobError` naming the run and the option. Returns ``{(model,
    target): estimated seconds per run}``: the timed step times the run's
    iterations (:data:`RUN_OVER_STEP`) and its fixed costs
    (:data:`RUN_FIXED_STEPS`)."""
    cells = {}
    for job in jobs:
        cells.setdefault((job.model, job.target), job)
    kinds, times = list(cells.values()), {}
    ctx = multiprocessing.get_context('fork')
    for i in range(0, len(kinds), num_procs):
        # as many side by side as the job runs (the last group filled up
        # with the first kinds again)
        group = (kinds[i:] + kinds * num_procs)[:num_procs]
        barrier = ctx.Barrier(len(group), timeout=600)
        results = in_children([(_timed, job, steps, barrier)
                               for job in group])
        errors = [r for ok, r in results if not ok]
        if errors:
            raise JobError(next((e for e in errors if e != _ANOTHER),
                                errors[0]))
        for job, (_, t) in zip(group, results):
            times.setdefault((job.model, job.target), []).append(
                (t['step_s'], t['iters_per_epoch'] * job.epochs))
    if os.environ.get('TLALIGN_DEBUG') == '1':
        print({cell: [f'{1e3 * s:.1f} ms' for s, _ in t]
               for cell, t in times.items()}, flush=True)
    return {cell: sum(s for s, _ in t) / len(t) *
            (RUN_OVER_STEP * t[0][1] + RUN_FIXED_STEPS)
            for cell, t in times.items()}


def estimate(jobs: Sequence[Job], per_run: Dict[tuple, float],
             num_procs: int) -> float:
    """The job's seconds: the runs in order, each started on the first
    free one of ``num_procs`` slots, as :func:`tools/run_demo.py`'s loop
    does."""
    slots = [0.0] * num_procs
    for job in jobs:
        i = slots.index(min(slots))
        slots[i] += per_run[job.model, job.target]
    return max(slots)


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


#: The label shift's batch size: mmpretrain's CutMix draws one lambda and
#: one box per batch, so the estimate rests on as many boxes as it mixes
#: batches. In batches of 8 the 360 held-out digits give 45 boxes; in the
#: configs' test batches of 128 they gave 3, the same 3 for every
#: checkpoint, and the estimate read about half of the many-box one on the
#: canvas setting (docs/results.md, issue 42).
LABEL_SHIFT_BATCH = 8


def label_shift(config: str, checkpoint: Optional[str], options=(),
                seed: int = 0, num_images: Optional[int] = None,
                batch_size: int = LABEL_SHIFT_BATCH) -> dict:
    """How far TL-Align's label of a trained model is from the CutMix
    target, on the config's held-out (test) images mixed in pairs by CutMix
    (alpha 1) in batches of ``batch_size``, batch ``i`` with seed ``seed +
    i`` (every checkpoint sees the same mixes), as source weights:
    ``mean_abs`` is the mean over images and sources of ``|w_aligned -
    w_area|`` (``|lambda_aligned - lambda_area|`` for two sources), ``rmse``
    the paper's Fig. 3 number; ``boxes`` the number of distinct CutMix
    boxes the images were mixed with (one per batch: 45 for 360 images in
    batches of 8). ``checkpoint`` None: the config's model, seeded.

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
    loader = build_dataloader(cfg, 'test', batch_size)
    boxes = set()

    def counted(batches):
        for batch in batches:
            # each image's pasted region (source 1's pixels), as bytes
            pasted = batch.record.pixel_weights[:, 1] > 0.5
            boxes.update(m.numpy().tobytes() for m in pasted)
            yield batch

    with torch.no_grad():
        result = label_rmse(model, counted(mixed_batches(
            model, loader, 'cutmix', 1.0, seed, num_images)))
    return dict({k: result[k] for k in ('mean_abs', 'rmse', 'num_images')},
                boxes=len(boxes))


# --- one run --------------------------------------------------------------


def preload() -> None:
    """Read the digits once in this process (``Digits`` caches them), for
    every process forked from it."""
    from tlalign_mm.datasets import Digits
    Digits(split='test')


class EpochProgress(Hook):
    """Sends ``(index, epochs done)`` down ``progress`` (a pipe's end) when
    an epoch of run ``index`` ends."""

    def __init__(self, index: int, progress):
        self.index, self.progress = index, progress

    def after_train_epoch(self, runner):
        # one small write: atomic on a pipe, whichever run sends it
        self.progress.send((self.index, runner.epoch + 1))


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
    record (also written to ``run.json`` in its work dir: the job's fields,
    the settings it ran with, its results), or one with ``error`` set."""
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
            record['torch'] = torch.__version__
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


# --- a work dir's runs ---------------------------------------------------


def find_runs(work_dir: str, models: Optional[Sequence[str]] = None,
              targets: Optional[Sequence[str]] = None,
              seeds: Optional[Sequence[int]] = None) -> List[dict]:
    """The records (``run.json``) of the runs in ``work_dir``, those of
    ``models``, ``targets`` and ``seeds`` where given, in the job's order
    (seed, model, target)."""
    records = []
    for path in sorted(glob.glob(osp.join(work_dir, '*', 'run.json'))):
        try:
            record = mmengine.load(path)
        except ValueError as error:
            raise JobError(f'{path} is not a run record: {error}') from None
        if not {'model', 'target', 'seed'} <= set(record):
            raise JobError(f'{path} is not a run record of the main job.')
        if (models and record['model'] not in models) or \
                (targets and record['target'] not in targets) or \
                (seeds is not None and record['seed'] not in seeds):
            continue
        records.append(record)
    if not records:
        picked = ' '.join(
            f'{flag} {" ".join(map(str, v))}' for flag, v in
            (('--models', models), ('--targets', targets),
             ('--seeds', seeds)) if v)
        raise JobError(
            f'no runs in {work_dir}{" of " + picked if picked else ""} (a '
            'run is a folder with a run.json): run the job first, or name '
            'its --work-dir.')
    names = list(MODELS) + list(dict.fromkeys(r['model'] for r in records))
    order = list(TARGETS) + sorted({r['target'] for r in records})
    records.sort(key=lambda r: (r['seed'], names.index(r['model']),
                                order.index(r['target'])))
    return records


def _seedless(record: dict) -> list:
    return [o for o in record.get('options', ())
            if not o.startswith('randomness.seed=')]


_EPOCH_KEYS = ('train_cfg.max_epochs=', 'param_scheduler.0.end=',
               'param_scheduler.1.begin=')


def settings(record: dict) -> dict:
    """What a run ran with, apart from its seed: the job-wide settings
    (``--epochs``: the length the job asked for, ``"recipe"`` for each
    model's own; ``--cfg-options``; ``code``, ``torch``, ``threads``) and
    the run's own (``epochs``, its length; ``job_options``: those two as
    its recipe took them, :func:`epoch_options`; ``config``;
    ``row_options``: the model's and the row's options). A record written
    before runs recorded one has it as None."""
    job_options = record.get('job_options')
    own = _seedless(record)
    asked = cfg = None
    if job_options is not None:
        own = own[len(job_options):]
        job_options = list(job_options)
        scaled = len(job_options) >= 3 and all(
            o.startswith(k) for o, k in zip(job_options, _EPOCH_KEYS))
        asked = int(job_options[0].split('=', 1)[1]) if scaled else \
            'recipe'
        cfg = job_options[3:] if scaled else job_options
    return {'--epochs': asked, '--cfg-options': cfg,
            'code': record.get('code'), 'torch': record.get('torch'),
            'threads': record.get('threads'),
            'epochs': record.get('epochs'), 'job_options': job_options,
            'config': osp.relpath(record['config'], ROOT),
            'row_options': own}


_JOB_SETTINGS = ('--epochs', '--cfg-options', 'code', 'torch', 'threads')


def check_one_pass(records: Sequence[dict], where: str) -> None:
    """Refuse runs that ran with different settings (:func:`settings`): the
    job-wide ones must agree across all runs, a run's own across the runs
    of each row and target (rows may differ: each model runs its recipe).
    The :class:`JobError` names each setting that differs, its values and
    runs that have them."""
    problems = []
    keyed = [(r, settings(r)) for r in records]
    for key in settings(records[0]):
        groups = {}
        for r, s in keyed:
            group = () if key in _JOB_SETTINGS else (r['model'], r['target'])
            groups.setdefault(group, {}).setdefault(
                json.dumps(s[key]), []).append(
                    run_name(r['model'], r['target'], r['seed']))
        for group, values in groups.items():
            if len(values) < 2:
                continue
            shown = '; '.join(
                f'{"not recorded" if value == "null" else value} in '
                f'{names[0]}' + (f' and {len(names) - 1} more'
                                 if len(names) > 1 else '')
                for value, names in values.items())
            problems.append(f'{" ".join(group + (key, ))} differs ({shown})')
    if problems:
        raise JobError(
            f'the runs in {where} come from passes with different settings: '
            f'{"; ".join(problems)}. Summarize one pass at a time (--models, '
            '--targets and --seeds pick runs; a --work-dir per pass keeps '
            'them apart), or rerun the others with the same options.')


def complete_seeds(records: Sequence[dict]) -> tuple:
    """``(records, left_out)``: the runs of the seeds that have every
    target of their model (the paired statistics need both), and a line per
    model naming the seeds left out."""
    targets = {}
    for r in records:
        targets.setdefault(r['model'], {}).setdefault(r['seed'], set()).add(
            r['target'])
    wanted = {r['target'] for r in records}
    left_out = {m: sorted(s for s, t in seeds.items() if t != wanted)
                for m, seeds in targets.items()}
    kept = [r for r in records if r['seed'] not in left_out[r['model']]]
    notes = [f'{m}: seeds {", ".join(map(str, s))} left out (not every '
             'target has finished)' for m, s in left_out.items() if s]
    return kept, notes


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
    issue saw TL-Align lag; None when it is the last one. (One model's
    runs: each model has its own length.)"""
    epochs = set.intersection(*(set(r['val_epochs']) for r in records))
    if not epochs:
        return None
    last = max(epochs)
    early = min(sorted(epochs), key=lambda e: abs(e - last / 3))
    return None if early == last else early


#: A label shift over fewer boxes than this is flagged beside one over
#: many (the job's own rests on 43-45).
FEW_BOXES = 10

#: The test batch size the label shift mixed before
#: :data:`LABEL_SHIFT_BATCH` (the demo configs' ``test_dataloader``), for
#: runs recorded without a count of boxes.
OLD_LABEL_SHIFT_BATCH = 128


def shift_boxes(record: dict) -> Optional[int]:
    """How many CutMix boxes a run's label shift rests on: as its record
    has it (``label_shift['boxes']``, or a recorded run's
    ``label_shift_boxes``), else, for a run from before the count, one per
    :data:`OLD_LABEL_SHIFT_BATCH` images (3 for the 360 held-out digits);
    None where nothing says."""
    shift = record.get('label_shift')
    if isinstance(shift, dict):
        if 'boxes' in shift:
            return shift['boxes']
        return math.ceil(shift['num_images'] / OLD_LABEL_SHIFT_BATCH) \
            if shift.get('num_images') else None
    return record.get('label_shift_boxes')


def _shift_spread(runs: Sequence[dict]) -> dict:
    """Mean, std and number of the runs' label shifts (``n`` 0 where no
    run holds one: a recorded run that kept only the top-1), and the
    fewest boxes one of them rests on (:func:`shift_boxes`; None where not
    known)."""
    runs = [r for r in runs if r.get('label_shift') is not None]
    values = [r['label_shift']['mean_abs'] if isinstance(
        r['label_shift'], dict) else r['label_shift'] for r in runs]
    boxes = [b for b in map(shift_boxes, runs) if b is not None]
    if not values:
        return dict(mean=math.nan, std=math.nan, n=0, boxes=None)
    return dict(spread(values)._asdict(),
                boxes=min(boxes) if boxes else None)


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
            early = early_epoch([r for r in records
                                 if r['model'] == model])
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
            t: _shift_spread([r for r in records
                              if r['model'] == model and r['target'] == t])
            for t in targets if acc[t]}
        out[model] = entry
    return out


# --- the recorded full evidence ----------------------------------------------


def read_recorded(path: str = RECORDED) -> dict:
    """The recorded full evidence (``configs/demo/main_job.yml``'s
    ``recorded``): ``{model: dict(pass=..., runs=[...], label_shift=...)}``,
    each run with ``target``, ``seed``, ``top1`` (and ``label_shift``,
    ``train_s`` where recorded); {} where there is no such file."""
    if not osp.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)['models']


def _recorded_summary(model: str, entry: dict, targets: Sequence[str],
                      seeds: Optional[Sequence[int]] = None) -> dict:
    """:func:`summarize`'s entry of a recorded model, over ``seeds`` (else
    all): the same statistics; the label shift from its runs, or as it was
    kept (mean and sd over all seeds) where the runs do not hold it."""
    runs = [dict(r, model=model) for r in entry['runs']
            if seeds is None or r['seed'] in seeds]
    summary = summarize(
        [dict(r, val_epochs=[], val_top1=[]) for r in runs], [model],
        [t for t in targets if any(r['target'] == t for r in runs)])[model]
    kept = entry.get('label_shift', {})
    for t, shift in summary['label_shift'].items():
        if shift['n'] == 0 and seeds is None and t in kept:
            summary['label_shift'][t] = kept[t]
    return summary


def recorded_rows(summary: dict, recorded: dict, seeds: Sequence[int],
                  targets: Sequence[str]) -> List[dict]:
    """The comparison of this job's results with the recorded full
    evidence: per model of the job, its row, then the recorded one over the
    same seeds, then the recorded one over all its seeds; then the other
    recorded models. Each: ``dict(model, what, seeds, entry, pass)`` with
    ``entry`` as :func:`summarize` gives and ``pass`` the recorded pass's
    description (None for this job)."""
    rows = []

    def add(model, what, seeds=None):
        entry = recorded[model]
        runs = sorted({r['seed'] for r in entry['runs']})
        rows.append(dict(model=model, what=what, seeds=seeds or runs,
                         entry=_recorded_summary(model, entry, targets,
                                                 seeds),
                         **{'pass': entry.get('pass', {})}))

    for model, entry in summary.items():
        rows.append(dict(model=model, what='this job', seeds=list(seeds),
                         entry=entry, **{'pass': None}))
        if model in recorded:
            runs = sorted({r['seed'] for r in recorded[model]['runs']})
            same = [s for s in seeds if s in runs]
            if same and same != runs:
                add(model, 'recorded, same seeds', same)
            add(model, 'recorded')
    for model in recorded:
        if model not in summary:
            add(model, 'recorded')
    return rows


def to_recorded(records: Sequence[dict], meta: dict) -> dict:
    """A work dir's runs as recorded full evidence (:func:`read_recorded`),
    a model each: its pass (command, date, code, machine, epochs, jobs,
    wall time) and per run the target, seed, top-1, training time and
    label shift (with the number of boxes it rests on)."""
    out = {}
    for model in dict.fromkeys(r['model'] for r in records):
        runs = [r for r in records if r['model'] == model]
        out[model] = dict(
            **{'pass': dict(
                command=meta.get('command'),
                date=time.strftime('%Y-%m-%d'), code=runs[0].get('code'),
                machine=meta.get('machine'), epochs=runs[0].get('epochs'),
                jobs=meta.get('jobs'), wall_s=meta.get('wall_s'))},
            runs=[dict(target=r['target'], seed=r['seed'], top1=r['top1'],
                       train_s=round(r['train_s'], 1),
                       label_shift=r['label_shift']['mean_abs'],
                       label_shift_boxes=shift_boxes(r))
                  for r in runs])
    return out


def write_recorded(path: str, models: dict) -> str:
    """Put ``models`` (:func:`to_recorded`) into the recorded file at
    ``path``, replacing those models' entries and keeping the others; a run
    per line."""
    data = dict(about=(
        "The main job's full evidence as recorded (configs/demo/"
        "main_job.yml, `recorded`): per model, the pass it came from and its "
        'runs (held-out top-1 in %, training time in s). tools/run_demo.py '
        'prints and draws it beside its own results; `tools/run_demo.py '
        '--summarize --record FILE` writes a model\'s entry from a work '
        "dir's runs."), models={})
    if osp.isfile(path):
        with open(path) as f:
            data = json.load(f)
    data['models'].update(models)
    lines = ['{', f' "about": {json.dumps(data["about"])},', ' "models": {']
    for i, (model, entry) in enumerate(data['models'].items()):
        lines.append(f'  {json.dumps(model)}: {{')
        for key, value in entry.items():
            if key == 'runs':
                runs = [f'    {json.dumps(r, ensure_ascii=False)}'
                        for r in value]
                lines.append('   "runs": [\n' + ',\n'.join(runs) + '\n   ],')
            else:
                lines.append(f'   {json.dumps(key)}: '
                             f'{json.dumps(value, ensure_ascii=False)},')
        lines[-1] = lines[-1].rstrip(',')
        lines.append('  }' + (',' if i < len(data['models']) - 1 else ''))
    lines += [' }', '}', '']
    with open(path, 'w') as f:
        f.write('\n'.join(lines))
    return path


# --- the report -----------------------------------------------------------


def _pm(mean, std, digits=2):
    if std != std:  # one seed
        return f'{mean:.{digits}f}'
    return f'{mean:.{digits}f} ± {std:.{digits}f}'


def _ci(d):
    low, high = d['ci']
    if low != low:
        return f'{d["mean"]:+.2f}'
    return f'{d["mean"]:+.2f} [{low:+.2f}, {high:+.2f}]'


def _p(d):
    return f'{d["p_value"]:.3f} / {d["wilcoxon_p"]:.3f}'


def _seeds(n: int) -> str:
    return f'{n} seed{"s" * (n != 1)}'


def _seed_range(seeds: Sequence[int]) -> str:
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f'{seeds[0]}–{seeds[-1]}'
    return ', '.join(map(str, seeds))


def markdown_table(head: Sequence[str], rows: Sequence[Sequence]) -> str:
    """A Markdown table (prettytable's), cells left-aligned."""
    table = PrettyTable(list(head))
    table.add_rows([list(row) for row in rows])
    table.set_style(TableStyle.MARKDOWN)
    table.align = 'l'
    return table.get_string()


def duration(seconds: float) -> str:
    """``4 min 12 s``, ``31 min``, ``1 h 5 min``."""
    seconds = round(seconds)
    if seconds < 60:
        return f'{seconds} s'
    minutes, s = divmod(seconds, 60)
    if minutes < 10:
        return f'{minutes} min {s} s'
    minutes = round(seconds / 60)
    if minutes < 60:
        return f'{minutes} min'
    return f'{minutes // 60} h {minutes % 60} min'


def interval_width_ratio(n: int, n_full: int) -> float:
    """How much wider a paired t interval over ``n`` seeds is than one over
    ``n_full`` at the same spread: ``(t_{n-1} / sqrt(n)) / (t_{n_full-1} /
    sqrt(n_full))``."""
    from scipy import stats
    return (stats.t.ppf(0.975, n - 1) / math.sqrt(n)) / \
        (stats.t.ppf(0.975, n_full - 1) / math.sqrt(n_full))


def _shift(shift: dict) -> str:
    """A label shift's mean +- std, with the boxes it rests on where
    known."""
    boxes = shift.get('boxes')
    return _pm(shift['mean'], shift['std'], 4) + (
        f' ({boxes} boxes)' if boxes else '')


def comparison_table(rows: List[dict], targets: Sequence[str]) -> str:
    """:func:`recorded_rows` as a Markdown table."""
    others = [t for t in targets if t != BASELINE]
    head = ['model', 'source', 'seeds'] + [f'{t} top-1' for t in targets]
    for t in others:
        head += [f'{t} − {BASELINE} (95% CI)', 'W/L/T',
                 'p (paired t / Wilcoxon)', f'label shift, {t}']
    table = []
    for row in rows:
        entry = row['entry']
        cells = [row['model'], row['what'], _seed_range(row['seeds'])]
        cells += [_pm(entry['targets'][t]['mean'], entry['targets'][t]['std'])
                  if t in entry['targets'] else '' for t in targets]
        for t in others:
            d = entry.get('paired', {}).get(t)
            shift = entry['label_shift'].get(t, {})
            cells += ['', '', ''] if d is None else [
                _ci(d), f'{d["wins"]}/{d["losses"]}/{d["ties"]}', _p(d)]
            cells.append(_shift(shift) if shift.get('n') else
                         'not kept per seed')
        table.append(cells)
    return markdown_table(head, table)


def markdown(summary: dict, records: List[dict], targets: List[str],
             meta: dict, recorded: Optional[List[dict]] = None) -> str:
    """The results table, the per-seed table, the run times, and the
    comparison with the recorded full evidence (:func:`recorded_rows`)."""
    others = [t for t in targets if t != BASELINE]
    intro = (
        f'Held-out top-1 (%) on scikit-learn\'s digits (360 test images), '
        f'{epochs_text(meta["epochs"])}, seeds '
        f'{_seed_range(meta["seeds"])}: mean ± std over seeds; difference '
        f'per seed (same seed: same initial weights, data order and mixes), '
        f'mean and 95% CI by paired t; '
        f'W/L/T: seeds the target won, lost, tied against {BASELINE}; p: '
        f'two-sided, of the paired t-test and of the Wilcoxon signed-rank '
        f'test (tied seeds dropped); label shift: mean '
        '|aligned − CutMix| label (source weights) of the trained '
        'checkpoints on the held-out images mixed by CutMix in batches of '
        f'{LABEL_SHIFT_BATCH}, the same mixes for every checkpoint (CutMix '
        'draws one box per batch; in brackets the distinct boxes the '
        'number rests on): how far TL-Align moves the target.')
    head = ['model'] + [f'{t} top-1' for t in targets]
    # a third of the way through: one column, its epoch in the header
    # where every model has the same, in each cell where they differ
    early = {e['paired_early'][t]['epoch'] for e in summary.values()
             for t in e.get('paired_early', {})}
    for t in others:
        head += [f'{t} − {BASELINE} (95% CI)', 'W/L/T',
                 'p (paired t / Wilcoxon)']
        if early:
            head.append(f'same, at epoch {next(iter(early))}'
                        if len(early) == 1 else 'same, a third of the way')
    head += [f'label shift, {t}' for t in targets]
    rows = []
    for model, entry in summary.items():
        row = [model]
        row += [_pm(entry['targets'][t]['mean'], entry['targets'][t]['std'])
                if t in entry['targets'] else '' for t in targets]
        for t in others:
            d = entry.get('paired', {}).get(t)
            row += ['', '', ''] if d is None else [
                _ci(d), f'{d["wins"]}/{d["losses"]}/{d["ties"]}', _p(d)]
            if early:
                d = entry.get('paired_early', {}).get(t)
                row += [(f'epoch {d["epoch"]}: ' if len(early) > 1 else '') +
                        f'{_ci(d)}, {d["wins"]}/{d["losses"]}/{d["ties"]}'
                        if d else '']
        row += [_shift(entry['label_shift'][t])
                if t in entry['label_shift'] else '' for t in targets]
        rows.append(row)
    by_key = {(r['model'], r['target'], r['seed']): r for r in records}
    per_seed = []
    for model in summary:
        for seed in meta['seeds']:
            cells = [by_key.get((model, t, seed)) for t in targets]
            if any(cells):
                per_seed.append([model, seed] + [
                    '' if r is None else
                    f'{r["top1"]:.2f} ({r["train_s"]:.0f} s)' for r in cells])
    if meta.get('wall_s') is not None:
        timing = (f'Wall time {duration(meta["wall_s"])} for {len(records)} '
                  f'runs, {meta["jobs"]} at a time, one thread each '
                  f'({meta["machine"]}).')
    else:
        timing = (f'{len(records)} runs read from their work dirs (the job\'s '
                  'wall time is not known: they are not the runs of one '
                  'job\'s summary); training times per run above.')
    parts = [intro, '', markdown_table(head, rows), '',
             'Per seed (top-1 %, train time s):', '',
             markdown_table(['model', 'seed', *targets], per_seed), '',
             timing, '']
    if recorded:
        passes = {}
        for row in recorded:
            if row['pass']:
                p = row['pass']
                passes.setdefault(
                    f'{p.get("date")}, {p.get("machine")}, code '
                    f'{p.get("code")}', []).append(row['model'])
        about = '; '.join(f'{", ".join(dict.fromkeys(models))}: {p}'
                          for p, models in passes.items())
        boxes = {row['entry']['label_shift'][t].get('boxes')
                 for row in recorded for t in row['entry']['label_shift']
                 if row['entry']['label_shift'][t].get('n')} - {None}
        parts += [
            'Beside the recorded full evidence (configs/demo/'
            f'{osp.basename(RECORDED)}; {about}). "recorded, same seeds": '
            'its runs of this job\'s seeds (a seed repeats bit for bit only '
            'with the same code, machine and thread count).' + (
                ' Compare label shifts only over as many boxes: one over a '
                f'few boxes ({min(boxes)} here; the job mixed 3 before issue '
                '42) is noisier, and on these checkpoints lower, than one '
                'over many.' if boxes and min(boxes) < FEW_BOXES else ''),
            '', comparison_table(recorded, targets), '']
    return '\n'.join(parts)


def headline(summary: dict, recorded: Optional[List[dict]],
             seeds: Sequence[int], full_seeds: int) -> str:
    """The result in a few sentences: each model's paired difference, its
    label shift, the recorded full evidence's, and what this many seeds can
    tell."""
    lines = []
    recorded = recorded or []
    for model, entry in summary.items():
        for t, d in entry.get('paired', {}).items():
            shift = entry['label_shift'].get(t, {})
            n = len(d['seeds'])
            line = f'{model}: {t} − {BASELINE} {_ci(d)} points ' + (
                f'(95% CI, paired t over {n} seeds)' if n > 1 else
                '(one seed: no interval)') + \
                f', W/L/T {d["wins"]}/{d["losses"]}/{d["ties"]}'
            if shift.get('n'):
                line += (f'; {t} moved the target by {shift["mean"]:.4f} of '
                         'λ on held-out CutMix pairs' + (
                             f' ({shift["boxes"]} boxes)'
                             if shift.get('boxes') else ''))
            full = next((r for r in recorded if r['model'] == model and
                         r['what'] == 'recorded'), None)
            if full is not None and t in full['entry'].get('paired', {}):
                f = full['entry']['paired'][t]
                line += (f'. Recorded over {len(full["seeds"])} seeds: '
                         f'{_ci(f)}, W/L/T {f["wins"]}/{f["losses"]}/'
                         f'{f["ties"]}')
            lines.append(line + '.')
    n = len(seeds)
    if 2 <= n < full_seeds:
        lines.append(
            f'{n} seeds give a wide interval: at the same seed-to-seed '
            f'spread it is {interval_width_ratio(n, full_seeds):.1f} times '
            f'as wide as over {full_seeds} seeds. The recorded '
            f'{full_seeds}-seed numbers are the evidence; --full reruns '
            'them.')
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
                  meta: dict, recorded: Optional[dict] = None) -> dict:
    """``summary.png``, ``summary.md`` and ``summary.json`` of the runs,
    beside the ``recorded`` full evidence (:func:`read_recorded`) where
    given."""
    summary = summarize(records, models, targets)
    compared = recorded_rows(summary, recorded, meta['seeds'], targets) \
        if recorded else None
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
        n = len(next(iter(accuracy[model].values())))
        titles[model] = f'{model}, {_seeds(n)}' + ''.join(
            f'\n{t} − {BASELINE}: {_ci(d)}\nW/L/T '
            f'{d["wins"]}/{d["losses"]}/{d["ties"]}'
            for t, d in summary[model].get('paired', {}).items())
    intervals = None
    if compared:
        intervals = [
            dict(label=f'{row["model"]}, {row["what"]}\n'
                 f'({_seeds(len(row["seeds"]))})', mean=d['mean'],
                 ci=tuple(d['ci']), recorded=row['what'] != 'this job')
            for row in compared
            for d in row['entry'].get('paired', {}).values()]
    png = figures.seed_comparison(accuracy, val_curves,
                                  osp.join(work_dir, 'summary.png'),
                                  titles=titles, intervals=intervals,
                                  baseline=BASELINE)
    md = markdown(summary, records, targets, meta, compared)
    with open(osp.join(work_dir, 'summary.md'), 'w') as f:
        f.write(md)
    mmengine.dump(dict(meta, models=summary, runs=records,
                       recorded=compared),
                  osp.join(work_dir, 'summary.json'), indent=1)
    return dict(summary=summary, markdown=md, png=png, recorded=compared)


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
