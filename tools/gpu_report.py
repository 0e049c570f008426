"""What a GPU user pays for TL-Align: one command, one process, one budget.

Measures a TL-Align training step against the same step with CutMix on the
models users train (DeiT-S, Swin-T, DeiT-B from mmpretrain, and timm's
DeiT-S; batch 128, 224², bf16 autocast, 1000 classes), and writes what it
measured as a Markdown table and a JSON file to ``--out``:

- settings: eager, under ``torch.compile`` (default mode) and under
  ``torch.compile(mode='reduce-overhead')`` (CUDA graphs; where the step
  cannot be captured, the reasons inductor gives are reported);
- TL-Align's ĀY paths side by side where more than one applies (on a GPU:
  the Triton kernel and the float32 SDPA second pass), the default marked;
- per row: the median step over interleaved repetitions (each TL-Align
  setting is timed in turns with the CutMix setting of its mode), the
  ratio to that CutMix setting, the memory a step adds and the peak, and
  their ratios; compile time (the warm-up steps beyond the timed median);
- one TL-Align step under ``torch.cuda.set_sync_debug_mode('error')``: the
  mixing and the model step, each passing or naming the first syncing call;
- the CUDA cases of the test suite (the test files that skip without
  CUDA, their ``cuda`` cases), run by pytest from this command;
- the environment (GPU, torch, CUDA, Triton, commit).

The budget (``--budget-s``) counts everything, compilation included. Phases
run eager first, then compiled, then CUDA graphs, each over every model, so
what runs out is the most expensive; a phase of one model stops cleanly at
its share of the budget and the report says what it measured and what not.
The steps are ``tools/benchmark.py``'s (one batch and one set of weights
for every setting; the data preprocessor is not timed).

    python tools/gpu_report.py --out work_dirs/gpu_report          # on a GPU
    python tools/gpu_report.py --device cpu --tiny --out /tmp/r    # dry run

On the GPU machine, which has no OpenMMLab packages and no registry, run
``tools/gpu_bootstrap/run_on_gpu.sh`` (docs/performance.md).
"""
import argparse
import collections
import contextlib
import importlib.util
import json
import os
import os.path as osp
import platform
import statistics
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ET

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402
from mmpretrain.structures import DataSample  # noqa: E402


def _load_benchmark():
    # tools/ is no package: load tools/benchmark.py by path, under its own
    # name, so its build/step functions are reused rather than copied; with
    # tools/ on the path, as it is for a script run from there.
    if osp.join(ROOT, 'tools') not in sys.path:
        sys.path.append(osp.join(ROOT, 'tools'))
    spec = importlib.util.spec_from_file_location(
        'gpu_report_benchmark', osp.join(ROOT, 'tools', 'benchmark.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


benchmark = _load_benchmark()

MODELS = ('deit-small', 'swin-tiny', 'deit-base', 'timm-deit-small')
MODES = ('eager', 'compile', 'reduce-overhead')
# A phase's share of the budget, by mode: compiling costs more than timing.
MODE_WEIGHT = {'eager': 1, 'compile': 3, 'reduce-overhead': 2}
# compiled_warmup: steps before timing a compiled setting (the first
# compiles, the second may recompile for what changes between steps)
FULL = dict(batch_size=128, img_size=224, num_classes=1000, reps=30,
            compiled_warmup=3)
TINY = dict(batch_size=8, img_size=32, num_classes=10, reps=2,
            compiled_warmup=2)
# --tiny: the same families at toy sizes (32 px, 2 blocks, narrow heads).
_TINY_VIT = dict(type='VisionTransformer', img_size=32, patch_size=8,
                 drop_path_rate=0.1)
TINY_ZOO = {
    'deit-small': dict(
        backbone=dict(_TINY_VIT, arch=dict(embed_dims=32, num_layers=2,
                                           num_heads=2,
                                           feedforward_channels=64)),
        head=dict(type='VisionTransformerClsHead', in_channels=32)),
    'deit-base': dict(
        backbone=dict(_TINY_VIT, arch=dict(embed_dims=48, num_layers=2,
                                           num_heads=3,
                                           feedforward_channels=96)),
        head=dict(type='VisionTransformerClsHead', in_channels=48)),
    'timm-deit-small': dict(
        backbone=dict(type='PooledTIMMBackbone',
                      model_name='deit_small_patch16_224', img_size=32,
                      patch_size=8, embed_dim=32, depth=2, num_heads=2,
                      global_pool='token', drop_path_rate=0.1),
        head=dict(type='VisionTransformerClsHead', in_channels=32)),
    'swin-tiny': dict(
        backbone=dict(type='SwinTransformer', img_size=32, window_size=4,
                      arch=dict(embed_dims=16, depths=[2, 2],
                                num_heads=[2, 4]),
                      out_indices=(1, ), drop_path_rate=0.2),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=32)),
}
TINY_PREFIX = 'tiny:'
# rounds a phase times past its share of the budget (not past the budget)
MIN_ROUNDS = 3

# ---------------------------------------------------------------------------
# The ĀY path: the ONE place in this report that knows how the core picks it.
#
# The core's switch is ``impl`` of ``tlalign_mm.core.head_mean_attention``
# (``'auto'`` by default: ``choose_impl`` takes the Triton kernel on a GPU,
# the explicit head-mean attention for heads narrower than 48, else SDPA
# with the labels as values), which ``core.align`` passes on for every
# recorded block. A training step aligns with ``'auto'``; to force a path
# for one setting, ``label_path`` wraps the function the records call
# (``tlalign_mm.core.records.head_mean_attention``) in this process only,
# giving it ``impl=path``, and counts the path each call takes. Swin's and
# PVT's blocks compute their softmax themselves: their labels are read off
# the recorded probabilities (``mean_probs_attention``) and no path applies.
# ---------------------------------------------------------------------------
LABEL_PATHS = ('triton', 'explicit', 'sdpa')
NO_PATH = 'softmax'  # no ĀY call: the block's own attention is read


@contextlib.contextmanager
def label_path(path=None, seen=None):
    """Within the block, TL-Align's ĀY takes ``path`` (one of
    :data:`LABEL_PATHS`; None: the package's choice). With ``seen`` (a
    Counter), count the paths the calls take (eager steps only)."""
    from tlalign_mm.core import attention, records
    original = records.head_mean_attention
    if path is None and seen is None:
        yield
        return

    def forced(query, key, labels, bias=None, scale=None, impl='auto',
               with_mass=False):
        auto = attention.choose_impl(query, key, bias, scale)
        # the Triton kernel applies only where 'auto' would take it (a GPU
        # with Triton, no bias, one float scale); elsewhere it is not forced
        if path is not None and (path != 'triton' or auto == 'triton'):
            impl = path
        if seen is not None:
            seen[auto if impl == 'auto' else impl] += 1
        return original(query, key, labels, bias, scale, impl, with_mass)

    records.head_mean_attention = forced
    try:
        yield
    finally:
        records.head_mean_attention = original


def path_name(seen):
    """The path a step took, from :func:`label_path`'s counts."""
    taken = [p for p in LABEL_PATHS if seen.get(p)]
    return '+'.join(taken) if taken else NO_PATH


# ---------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------
class Budget:
    """Wall-clock budget from ``start``, read off ``clock`` (seconds); the
    run's first measurement is always taken (a report with no number says
    nothing)."""

    def __init__(self, seconds, clock=time.perf_counter):
        self.seconds = seconds
        self.clock = clock
        self.start = clock()
        self.measurements = 0
        self.cut = None  # where the budget first cut a phase short
        self.warmup_s = {}  # the longest warm-up so far, by mode

    def elapsed(self):
        return self.clock() - self.start

    def left(self):
        return self.seconds - self.elapsed()

    def may_go_on(self, deadline):
        return self.measurements == 0 or self.clock() < deadline

    def stop(self, where):
        if self.cut is None:
            self.cut = where

    def note(self):
        """None, or what the budget cut, for the report."""
        if self.cut is None:
            return None
        steps = 'its first measurement' if self.measurements == 1 else \
            f'{self.measurements} timed steps'
        return f'budget of {self.seconds:g} s spent after {steps}; ' \
            f'first cut: {self.cut}'


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------
def make_data(cfg, device):
    g = torch.Generator().manual_seed(0)
    n, side, classes = cfg['batch_size'], cfg['img_size'], cfg['num_classes']
    return dict(
        inputs=[torch.randint(0, 256, (3, side, side), dtype=torch.uint8,
                              generator=g).to(device) for _ in range(n)],
        data_samples=[DataSample().set_gt_label(int(i)) for i in
                      torch.randint(0, classes, (n, ), generator=g)])


def compile_model(model, mode, backend):
    """As ``benchmark.compiled`` (the forward with the loss under
    torch.compile, drop-path rates as Python floats: see its docstring),
    with a backend and, for inductor, a mode."""
    for module in model.modules():
        if hasattr(module, 'drop_prob'):
            module.drop_prob = float(module.drop_prob)
    kwargs = dict(backend=backend)
    if mode == 'reduce-overhead' and backend == 'inductor':
        kwargs['mode'] = 'reduce-overhead'
    model.forward = torch.compile(model.forward, **kwargs)
    return model


class Setting:
    """One row: a model instance, its optimizer, its ĀY path, and what was
    measured."""

    def __init__(self, method, mode, path, model):
        self.method, self.mode, self.path = method, mode, path
        self.model = model
        self.optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.times, self.step_mem, self.peak_mem = [], [], []
        self.warmup = []
        self.graphs = self.breaks = 0
        self.recompiled = False
        self.default = False
        self.capture_issues = []  # why inductor did not capture CUDA graphs
        self.error = None  # what stopped this setting, if anything

    @property
    def name(self):
        name = self.method if self.method == 'cutmix' else \
            f'{self.method}[{self.path}]'
        return name if self.mode == 'eager' else f'{name}+{self.mode}'

    def run(self, data, device, bf16, num_classes):
        """One training step; returns (seconds, step bytes, peak bytes)."""
        resident = 0
        if device.type == 'cuda':
            resident = torch.cuda.memory_allocated()
            if self.mode == 'reduce-overhead':
                torch.compiler.cudagraph_mark_step_begin()
        # the default row runs as the package chooses, unforced
        forced = self.method != 'cutmix' and not self.default and \
            self.path != NO_PATH
        skips = cudagraph_skips(self.capture_issues) \
            if self.mode == 'reduce-overhead' else contextlib.nullcontext()
        with label_path(self.path if forced else None), skips:
            t, mem = benchmark.step(self.model, self.optim, data,
                                    self.method, device, bf16, num_classes)
        return t, mem - resident, mem


def dynamo_counts():
    from torch._dynamo.utils import counters
    return (sum(counters['stats'].get(k, 0) for k in ('unique_graphs', )),
            sum(counters['graph_break'].values()))


@contextlib.contextmanager
def cudagraph_skips(reasons):
    """Collect the reasons inductor gives for not capturing CUDA graphs
    (``log_cudagraph_skip_and_bump_counter``, imported by name where it is
    called)."""
    import importlib
    patched = []

    def record(msg):
        reasons.append(str(msg))

    for name in ('torch._inductor.cudagraph_utils',
                 'torch._inductor.compile_fx', 'torch._inductor.output_code',
                 'torch._inductor.cudagraph_trees'):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, 'log_cudagraph_skip_and_bump_counter', None)
        if fn is not None:
            def wrapped(msg, _fn=fn):
                record(msg)
                return _fn(msg)
            patched.append((mod, fn))
            mod.log_cudagraph_skip_and_bump_counter = wrapped
    try:
        yield
    finally:
        for mod, fn in patched:
            mod.log_cudagraph_skip_and_bump_counter = fn


# ---------------------------------------------------------------------------
# One model, one mode
# ---------------------------------------------------------------------------
def build(name, method, cfg, device, base_state):
    model = benchmark.build(name, method, cfg['num_classes']).to(device)
    model.load_state_dict(base_state)  # one set of weights for all
    model.train()
    return model


def detect_paths(name, cfg, data, device, args, base_state):
    """The ĀY path the package picks for this model, and the others that
    apply (each taken by one eager step under :func:`label_path`)."""
    setting = Setting('tlalign', 'eager', None,
                      build(name, 'tlalign', cfg, device, base_state))
    seen = collections.Counter()
    with label_path(None, seen):
        benchmark.step(setting.model, setting.optim, data, 'tlalign',
                       device, args.bf16, cfg['num_classes'])
    default = path_name(seen)
    others = []
    if default != NO_PATH:
        for path in LABEL_PATHS:
            if path == default:
                continue
            seen = collections.Counter()
            with label_path(path, seen):
                benchmark.step(setting.model, setting.optim, data,
                               'tlalign', device, args.bf16,
                               cfg['num_classes'])
            if path_name(seen) == path:
                others.append(path)
    del setting
    return default, others


def measure(name, mode, cfg, data, device, args, paths, base_state,
            budget, deadline, hard_end):
    """Interleaved steps of CutMix and each TL-Align path in ``mode``, until
    ``cfg['reps']`` rounds or ``deadline`` (this phase's share). Compiling
    is the expensive part, so what is compiled is not thrown away: CutMix
    and the default path are warmed up, and :data:`MIN_ROUNDS` rounds
    taken, up to ``hard_end`` (a later phase then gets less); the other
    paths only within ``deadline``; and no warm-up starts that the longest
    one so far in this mode would take past its end. Returns the settings
    and a note of what the budget cut."""
    default, others = paths
    settings = [Setting('cutmix', mode, None,
                        build(name, 'cutmix', cfg, device, base_state))]
    for path in [default] + others:
        s = Setting('tlalign', mode, path,
                    build(name, 'tlalign', cfg, device, base_state))
        s.default = path == default
        settings.append(s)
    if mode != 'eager':
        torch._dynamo.reset()
        for s in settings:
            # One eager step first, in every setting alike, so that every
            # setting is compiled after the same first step.
            s.run(data, device, args.bf16, cfg['num_classes'])
            compile_model(s.model, mode, args.compile_backend)
    warm = 1 if mode == 'eager' else cfg['compiled_warmup']
    note = ''
    ready = []
    for i, s in enumerate(settings):
        end = (hard_end if i < 2 else deadline) - budget.warmup_s.get(mode, 0)
        if not budget.may_go_on(end):
            note = f'{s.name} and later not warmed up'
            break
        graphs, breaks = dynamo_counts()
        try:
            for _ in range(warm):
                s.warmup.append(s.run(data, device, args.bf16,
                                      cfg['num_classes'])[0])
        except Exception as err:  # noqa: BLE001  (reported, not fatal)
            s.error = failure(err)
            continue
        finally:
            after = dynamo_counts()
            s.graphs, s.breaks = after[0] - graphs, after[1] - breaks
            budget.warmup_s[mode] = max(budget.warmup_s.get(mode, 0),
                                        sum(s.warmup))
        ready.append(s)
    if ready[:1] != settings[:1] or len(ready) < 2:
        ready = []  # a TL-Align row needs its CutMix beside it
    for rep in range(cfg['reps']):
        for s in ready:
            end = hard_end if rep < MIN_ROUNDS else deadline
            if not budget.may_go_on(end):
                note = note or f'stopped in repetition {rep + 1}'
                break
            graphs = dynamo_counts()[0]
            try:
                t, step_mem, peak = s.run(data, device, args.bf16,
                                          cfg['num_classes'])
            except Exception as err:  # noqa: BLE001  (reported, not fatal)
                s.error = failure(err)
                ready = [r for r in ready if r is not s]
                continue
            s.recompiled |= dynamo_counts()[0] != graphs
            s.times.append(t)
            s.step_mem.append(step_mem)
            s.peak_mem.append(peak)
            budget.measurements += 1
        else:
            continue
        break
    if mode == 'reduce-overhead' and (device.type != 'cuda' or
                                      args.compile_backend != 'inductor'):
        for s in settings:
            s.capture_issues.append(
                'CUDA graphs need inductor on a CUDA device '
                f'(here: {args.compile_backend} on {device.type})')
    for s in settings:
        s.model = s.optim = None
    if device.type == 'cuda':
        torch.cuda.empty_cache()
    return settings, note


def failure(err):
    """An exception as one line of the report (the run goes on)."""
    lines = str(err).strip().splitlines()
    return f'{type(err).__name__}: {lines[0][:300] if lines else ""}'


def rows_of(name, settings, note, planned):
    cutmix = settings[0]
    ref_t = statistics.median(cutmix.times) if cutmix.times else None
    ref_m = max(cutmix.step_mem) if cutmix.step_mem else None
    ref_p = max(cutmix.peak_mem) if cutmix.peak_mem else None
    rows = []
    for s in settings:
        captured = None
        if s.mode == 'reduce-overhead':
            captured = 'no' if s.capture_issues else 'yes'
        row = dict(model=name, setting=s.name, method=s.method, mode=s.mode,
                   path=s.path, default_path=s.default, reps=len(s.times),
                   step_s=None, step_ratio=None, step_mib=None,
                   mem_ratio=None, peak_mib=None, peak_ratio=None,
                   compile_s=None, graphs=s.graphs, graph_breaks=s.breaks,
                   recompiled_while_timed=s.recompiled, captured=captured,
                   capture_issues=sorted(set(s.capture_issues)),
                   error=s.error,
                   # the budget's note on the rows it cut short
                   note=f'budget: {note}' if note and len(s.times) < planned
                   else '')
        if s.times:
            t = statistics.median(s.times)
            row.update(step_s=t, step_mib=max(s.step_mem) / 2**20,
                       peak_mib=max(s.peak_mem) / 2**20)
            if s.mode != 'eager':
                row['compile_s'] = max(sum(s.warmup) - len(s.warmup) * t, 0.)
            if s.method != 'cutmix' and ref_t:
                row['step_ratio'] = t / ref_t
                row['mem_ratio'] = max(s.step_mem) / ref_m if ref_m else None
                row['peak_ratio'] = max(s.peak_mem) / ref_p
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# Syncs, CUDA tests, environment
# ---------------------------------------------------------------------------
def first_sync(fn):
    """'pass', or the sync error and the innermost frame outside torch."""
    try:
        torch.cuda.set_sync_debug_mode('error')
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    except RuntimeError as err:
        frames = [f for f in traceback.extract_tb(err.__traceback__)
                  if f'{os.sep}torch{os.sep}' not in f.filename]
        where = f'{frames[-1].filename}:{frames[-1].lineno} ' \
            f'({frames[-1].line})' if frames else '?'
        return f'{str(err).splitlines()[0]} at {where}'
    return 'pass'


def sync_check(name, cfg, data, device, args, base_state):
    """One TL-Align step (the package's default path) with every host sync
    an error: the mixing (data preprocessor) and the model step apart."""
    if device.type != 'cuda':
        return dict(model=name, mixing='not run: needs CUDA',
                    model_step='not run: needs CUDA')
    model = build(name, 'tlalign', cfg, device, base_state)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # one step first: lazy CUDA initialisation syncs once, by design
    benchmark.step(model, optim, data, 'tlalign', device, args.bf16,
                   cfg['num_classes'])
    torch.cuda.synchronize()
    batch = {}

    def mixing():
        batch.update(model.data_preprocessor(benchmark.fresh(data),
                                             training=True))

    def model_step():
        with torch.autocast('cuda', dtype=torch.bfloat16, enabled=args.bf16):
            losses = model(**batch, mode='loss')
        loss = sum(v for k, v in losses.items() if 'loss' in k)
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    result = dict(model=name, mixing=first_sync(mixing))
    if not batch:
        mixing()
    result['model_step'] = first_sync(model_step)
    torch.cuda.synchronize()
    return result


def cuda_test_files():
    """Test files that skip cases without CUDA (their ``cuda`` cases are
    the ones CI never runs)."""
    found = []
    for folder, _, files in os.walk(osp.join(ROOT, 'tests')):
        for f in sorted(files):
            if f.startswith('test_') and f.endswith('.py'):
                path = osp.join(folder, f)
                with open(path, encoding='utf-8') as fh:
                    if 'cuda.is_available()' in fh.read():
                        found.append(osp.relpath(path, ROOT))
    return sorted(found)


def run_cuda_tests(out_dir, timeout):
    files = cuda_test_files()
    xml = osp.join(out_dir, 'cuda_tests.xml')
    cmd = [sys.executable, '-m', 'pytest', *files, '-k', 'cuda', '-q',
           '-p', 'no:cacheprovider', f'--junitxml={xml}']
    result = dict(files=files, command=' '.join(cmd[1:]), cases=[])
    if not files:
        result['outcome'] = 'no test file skips without CUDA'
        return result
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                  if p])
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        result['outcome'] = f'timed out after {timeout:.0f} s (budget)'
        return result
    result['seconds'] = time.perf_counter() - start
    result['returncode'] = proc.returncode
    result['tail'] = (proc.stdout + proc.stderr)[-3000:]
    if osp.exists(xml):
        for case in ET.parse(xml).getroot().iter('testcase'):
            outcome = 'passed'
            for tag in ('failure', 'error', 'skipped'):
                if case.find(tag) is not None:
                    outcome = {'failure': 'failed'}.get(tag, tag)
            result['cases'].append(dict(
                name=f"{case.get('classname')}::{case.get('name')}",
                outcome=outcome))
    counts = collections.Counter(c['outcome'] for c in result['cases'])
    result['counts'] = dict(counts)
    result['outcome'] = ', '.join(f'{n} {k}' for k, n in
                                  sorted(counts.items())) or \
        f'pytest exit {proc.returncode}, no case ran'
    return result


def commit(given):
    if given:
        return given
    try:
        head = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=ROOT,
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(['git', 'status', '--porcelain',
                                '--untracked-files=no'], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return head.stdout.strip()[:12] + (
                ' (uncommitted changes)' if dirty.stdout.strip() else '')
    except (OSError, subprocess.SubprocessError):
        pass
    return 'unknown (no git here: pass --commit)'


def environment(device, args):
    env = dict(device=str(device), torch=torch.__version__,
               cuda=torch.version.cuda, python=platform.python_version(),
               commit=commit(args.commit), cpu_threads=torch.get_num_threads())
    try:
        import triton
        env['triton'] = triton.__version__
    except ImportError:
        env['triton'] = 'not installed'
    if device.type == 'cuda':
        env['gpu'] = torch.cuda.get_device_name(device)
        env['capability'] = '.'.join(
            map(str, torch.cuda.get_device_capability(device)))
    else:
        env['gpu'] = 'none'
    for pkg in ('mmengine', 'mmcv', 'mmpretrain', 'timm'):
        try:
            env[pkg] = __import__(pkg).__version__
        except ImportError:
            env[pkg] = 'not installed'
    return env


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def _f(value, fmt):
    return '' if value is None else format(value, fmt)


def against_targets(rows):
    """The issue's targets, on the default-path TL-Align rows: at most
    1.05x CutMix's step, 1.00x its memory (the step's own, to 0.5%)."""
    measured = [r for r in rows if r['method'] == 'tlalign'
                and r['default_path'] and r['step_ratio'] is not None]
    if not measured:
        return 'no TL-Align row measured'
    slow = [r for r in measured if r['step_ratio'] > 1.05]
    heavy = [r for r in measured if (r['mem_ratio'] or 1.) > 1.005]
    worst = max(measured, key=lambda r: r['step_ratio'])
    return (f"step ≤ 1.05× CutMix in {len(measured) - len(slow)} of "
            f"{len(measured)} rows (the most: {worst['step_ratio']:.3f}, "
            f"{worst['model']} {worst['setting']}); memory 1.00× in "
            f"{len(measured) - len(heavy)} of {len(measured)}")


def markdown(report):
    env, cfg = report['environment'], report['config']
    lines = [
        f"# TL-Align against CutMix: {env['gpu']} ({report['date']})", '',
        f"torch {env['torch']}, CUDA {env['cuda']}, Triton {env['triton']}, "
        f"mmpretrain {env['mmpretrain']}, timm {env['timm']}; commit "
        f"{env['commit']}. Batch {cfg['batch_size']}, {cfg['img_size']}², "
        f"{cfg['num_classes']} classes, bf16 autocast {cfg['bf16']}, "
        f"compile backend {cfg['compile_backend']}"
        f"{', tiny models' if cfg['tiny'] else ''}.", '',
        '`×`: TL-Align over the CutMix setting of the same mode, timed in '
        'turns with it. step MiB: the peak a step allocates above what was '
        'allocated before it (CPU: the bytes saved for backward); peak MiB: '
        'the peak allocated (every setting\'s weights and optimizer state '
        'included). `*`: the ĀY path the package picks.', '',
        '| model | setting | ĀY path | reps | step ms | × CutMix | step MiB '
        '| × | peak MiB | × | compile s | graphs | note |',
        '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in report['rows']:
        path = '' if r['method'] == 'cutmix' else \
            r['path'] + (' *' if r['default_path'] else '')
        note = r['note']
        if r['captured'] == 'no':
            note = '; '.join(filter(None, [note, 'not captured: ' + '; '.join(
                r['capture_issues'])]))
        if r['error']:
            note = '; '.join(filter(None, [note, 'failed: ' + r['error']]))
        if r['recompiled_while_timed']:
            note = '; '.join(filter(None, [note, 'recompiled while timed']))
        graphs = '' if r['mode'] == 'eager' else \
            f"{r['graphs']} ({r['graph_breaks']} breaks)"
        lines.append(
            f"| {r['model']} | {r['setting']} | {path} | {r['reps']} | "
            f"{_f(r['step_s'] and r['step_s'] * 1e3, '.1f')} | "
            f"{_f(r['step_ratio'], '.3f')} | {_f(r['step_mib'], '.1f')} | "
            f"{_f(r['mem_ratio'], '.3f')} | {_f(r['peak_mib'], '.1f')} | "
            f"{_f(r['peak_ratio'], '.3f')} | {_f(r['compile_s'], '.1f')} | "
            f"{graphs} | {note} |")
    lines.append('')
    lines.append(f"- targets (the package's default path): "
                 f"{against_targets(report['rows'])}")
    for item in report['not_measured']:
        lines.append(f"- not measured: {item['model']} {item['mode']}: "
                     f"{item['reason']}")
    sync = report['sync_check']
    lines.append(f"- host syncs, one TL-Align step of {sync.get('model')} "
                 f"(`set_sync_debug_mode('error')`): mixing: "
                 f"{sync.get('mixing')}; model step: {sync.get('model_step')}")
    tests = report['cuda_tests']
    lines.append(f"- CUDA tests ({', '.join(tests.get('files', [])) or '-'}"
                 f", `-k cuda`): {tests.get('outcome')}")
    for case in tests.get('cases', []):
        if case['outcome'] in ('failed', 'error'):
            lines.append(f"  - {case['outcome']}: {case['name']}")
    b = report['budget']
    lines.append(f"- budget {b['budget_s']:.0f} s, spent {b['spent_s']:.0f} s,"
                 f" {b['measurements']} timed steps"
                 + (f"; stopped: {b['stop']}" if b['stop'] else
                    '; everything planned was measured'))
    return '\n'.join(lines) + '\n'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', required=True,
                        help='folder for gpu_report.md, gpu_report.json')
    parser.add_argument('--budget-s', type=float, default=420.)
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--tiny', action='store_true',
                        help='toy models, batch 8, 32 px (the dry run)')
    parser.add_argument('--models', default=','.join(MODELS))
    parser.add_argument('--modes', default=','.join(MODES))
    parser.add_argument('--reps', type=int, default=None,
                        help='timed rounds per phase (30; --tiny: 2)')
    parser.add_argument('--no-bf16', dest='bf16', action='store_false')
    parser.add_argument('--compile-backend', default=None,
                        help="torch.compile's backend (inductor; --tiny on "
                        "CPU: eager, dynamo alone, which compiles in seconds)")
    parser.add_argument('--tests-s', type=float, default=75.,
                        help='seconds kept from the budget for the sync '
                        'check and the CUDA tests')
    parser.add_argument('--no-tests', dest='tests', action='store_false')
    parser.add_argument('--commit', default=None,
                        help='the commit, where the tree has no git')
    args = parser.parse_args(argv)
    args.models = args.models.split(',')
    args.modes = args.modes.split(',')
    for value, known in ((args.models, MODELS), (args.modes, MODES)):
        unknown = set(value) - set(known)
        if unknown:
            parser.error(f'unknown {sorted(unknown)}: choose from {known}')
    if args.compile_backend is None:
        args.compile_backend = 'eager' if args.tiny and \
            args.device == 'cpu' else 'inductor'
    return args


def main(argv=None, clock=time.perf_counter):
    """Run the report; ``clock`` (seconds) is what the budget is read off
    (the step timings are benchmark.py's own)."""
    args = parse_args(argv)
    budget = Budget(args.budget_s, clock)
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('--device cuda: torch sees no CUDA device (use '
                         '--device cpu --tiny for the dry run)')
    cfg = dict(TINY if args.tiny else FULL)
    if args.reps:
        cfg['reps'] = args.reps
    if args.tiny:
        benchmark.MODELS_ZOO.update(
            {TINY_PREFIX + k: v for k, v in TINY_ZOO.items()})
    # Several compiled settings of one model are alive at once.
    torch._dynamo.config.cache_size_limit = 64
    os.makedirs(args.out, exist_ok=True)
    env = environment(device, args)
    print(f"gpu_report: {env['gpu']}, torch {env['torch']}, commit "
          f"{env['commit']}, budget {args.budget_s:.0f} s", flush=True)
    data = make_data(cfg, device)
    tests_s = min(args.tests_s, 0.25 * args.budget_s) if args.tests else 0.
    measure_end = budget.start + args.budget_s - tests_s
    plan = [(mode, name) for mode in args.modes for name in args.models]
    weights = [MODE_WEIGHT[mode] for mode, _ in plan]
    rows, not_measured, models = [], [], {}
    for i, (mode, name) in enumerate(plan):
        key = (TINY_PREFIX if args.tiny else '') + name
        if not budget.may_go_on(measure_end):
            not_measured.append(dict(model=name, mode=mode,
                                     reason='budget spent before it'))
            budget.stop(f'{name} {mode} not started')
            continue
        share = (measure_end - clock()) * weights[i] / sum(weights[i:])
        t0 = clock()
        try:
            if name not in models:
                torch.manual_seed(0)
                base = benchmark.build(key, 'cutmix', cfg['num_classes'])
                state = base.state_dict()
                models[name] = dict(state=state, paths=detect_paths(
                    key, cfg, data, device, args, state))
            settings, note = measure(
                key, mode, cfg, data, device, args, models[name]['paths'],
                models[name]['state'], budget, t0 + max(share, 0.),
                measure_end)
        except Exception as err:  # noqa: BLE001  (reported, not fatal)
            traceback.print_exc()
            not_measured.append(dict(model=name, mode=mode,
                                     reason='failed: ' + failure(err)))
            continue
        if note:
            budget.stop(f'{name} {mode}: {note}')
        rows += rows_of(name, settings, note, cfg['reps'])
        print(f'  {name} {mode}: {clock() - t0:.1f} s, '
              f'{sum(len(s.times) for s in settings)} timed steps '
              f'{note}', flush=True)
    sync = dict(model=None, mixing='not run', model_step='not run')
    tests = dict(outcome='not run (--no-tests)', files=[])
    if args.tests:
        name = args.models[0]
        if budget.left() > 0 and name in models:
            try:
                sync = sync_check((TINY_PREFIX if args.tiny else '') + name,
                                  cfg, data, device, args,
                                  models[name]['state'])
            except Exception as err:  # noqa: BLE001  (reported, not fatal)
                sync = dict(mixing='failed: ' + failure(err),
                            model_step='not run')
            sync['model'] = name
        else:
            sync = dict(model=args.models[0], mixing='not run: budget spent',
                        model_step='not run: budget spent')
        tests = run_cuda_tests(args.out, budget.left()) \
            if budget.left() > 1 else dict(outcome='not run: budget spent',
                                           files=cuda_test_files())
    report = dict(
        date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
        environment=env,
        config=dict(cfg, bf16=args.bf16, tiny=args.tiny,
                    compile_backend=args.compile_backend,
                    models=args.models, modes=args.modes),
        rows=rows, not_measured=not_measured, sync_check=sync,
        cuda_tests=tests,
        budget=dict(budget_s=args.budget_s, spent_s=budget.elapsed(),
                    measurements=budget.measurements,
                    stop=budget.note()))
    table = markdown(report)
    with open(osp.join(args.out, 'gpu_report.json'), 'w') as f:
        json.dump(report, f, indent=1)
    with open(osp.join(args.out, 'gpu_report.md'), 'w') as f:
        f.write(table)
    print(table, flush=True)
    return report


if __name__ == '__main__':
    main()
