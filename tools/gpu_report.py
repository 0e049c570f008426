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
- the environment (mmengine's ``collect_env``: GPU, torch, CUDA, compilers;
  and Triton, mmpretrain, timm, the commit).

The CUDA cases of the test suite are CI's: ``pytest -m cuda tests`` on a
machine with a GPU and the whole stack (the ``cuda`` marker).

The budget (``--budget-s``) counts everything, compilation included. Phases
run eager first, then compiled, then CUDA graphs, each over every model, so
what runs out is the most expensive; a phase of one model stops cleanly at
its share of the budget and the report says what it measured and what not.
The steps are ``tools/benchmark.py``'s (:mod:`tlalign_mm.testing.steps`:
one batch and one set of weights for every setting; the data preprocessor
is not timed). A TL-Align setting's ĀY path is its classifier's
``align_cfg=dict(impl=...)``.

    python tools/gpu_report.py --out work_dirs/gpu_report          # on a GPU
    python tools/gpu_report.py --device cpu --tiny --out /tmp/r    # dry run

On the GPU machine, which has no OpenMMLab packages and no registry, run
``tools/gpu_bootstrap/run_on_gpu.sh`` (docs/performance.md).
"""
import argparse
import contextlib
import os
import os.path as osp
import statistics
import sys
import time
import traceback

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import mmengine  # noqa: E402
import torch  # noqa: E402
from mmengine.utils import get_git_hash  # noqa: E402
from mmengine.utils.dl_utils import collect_env  # noqa: E402
from prettytable import PrettyTable, TableStyle  # noqa: E402

from tlalign_mm.core.attention import choose_impl  # noqa: E402
from tlalign_mm.testing import steps  # noqa: E402

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
# rounds a phase times past its share of the budget (not past the budget)
MIN_ROUNDS = 3

LABEL_PATHS = ('triton', 'explicit', 'sdpa')
NO_PATH = 'softmax'  # no ĀY call: the block's own attention is read


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
    return steps.make_data(cfg['batch_size'], cfg['img_size'],
                           cfg['num_classes'], device)


class Setting:
    """One row: a model instance, its optimizer, its ĀY path, and what was
    measured."""

    def __init__(self, method, mode, path, model, default=False):
        self.method, self.mode, self.path = method, mode, path
        self.model = model
        self.optim = torch.optim.AdamW(model.parameters(), lr=1e-4)
        self.times, self.step_mem, self.peak_mem = [], [], []
        self.warmup = []
        self.graphs = self.breaks = 0
        self.recompiled = False
        self.default = default
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
        skips = cudagraph_skips(self.capture_issues) \
            if self.mode == 'reduce-overhead' else contextlib.nullcontext()
        with skips:
            t, mem = steps.step(self.model, self.optim, data, self.method,
                                device, bf16, num_classes)
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
def build(model, method, cfg, device, base_state, path=None):
    """A classifier of ``method`` with the shared weights; a TL-Align one
    takes ``path`` (``align_cfg=dict(impl=path)``; None: the package's
    choice)."""
    impl = None if path in (None, NO_PATH) else dict(impl=path)
    classifier = steps.build(model, method, cfg['num_classes'], impl)
    classifier.to(device).load_state_dict(base_state)  # one set of weights
    classifier.train()
    return classifier


def detect_paths(model, cfg, data, device, base_state):
    """The ĀY path the package picks for this model (``choose_impl`` on
    what one recorded forward of a batch recorded, block by block), and the
    others that apply: SDPA and explicit wherever queries and keys are
    recorded, Triton only where the package would take it (a GPU with
    Triton, no bias, one float scale)."""
    classifier = build(model, 'tlalign', cfg, device, base_state)
    batch = classifier.data_preprocessor(steps.fresh(data), training=True)
    with torch.no_grad():
        _, recorded = classifier.recording(batch['inputs'])
    chosen = {choose_impl(s.q, s.k, s.bias, s.scale) for s in recorded.slots
              if s.q is not None}
    if not chosen:  # every block computes its own softmax
        return NO_PATH, []
    default = '+'.join(p for p in LABEL_PATHS if p in chosen)
    return default, [p for p in LABEL_PATHS if p != default and (
        p != 'triton' or chosen == {'triton'})]


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
    for path in [default] + others:  # the default row as the package picks
        settings.append(Setting('tlalign', mode, path, build(
            name, 'tlalign', cfg, device, base_state,
            None if path == default else path), default=path == default))
    if mode != 'eager':
        torch._dynamo.reset()
        for s in settings:
            # One eager step first, in every setting alike, so that every
            # setting is compiled after the same first step.
            s.run(data, device, args.bf16, cfg['num_classes'])
            steps.compiled(s.model, 'reduce-overhead' if mode ==
                           'reduce-overhead' else 'default',
                           args.compile_backend)
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
# Syncs, environment
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
    steps.step(model, optim, data, 'tlalign', device, args.bf16,
                   cfg['num_classes'])
    torch.cuda.synchronize()
    batch = {}

    def mixing():
        batch.update(model.data_preprocessor(steps.fresh(data),
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


def environment(device, args):
    """mmengine's ``collect_env`` (GPU, torch, CUDA, compilers), and what it
    does not name: Triton, mmpretrain, timm, the device's capability and
    the commit (``--commit`` where the tree has no git)."""
    env = {k: str(v) for k, v in collect_env().items()}
    env.update(device=str(device), torch=torch.__version__,
               cuda=str(torch.version.cuda),
               commit=args.commit or get_git_hash(
                   'unknown (no git here: pass --commit)', digits=12),
               cpu_threads=torch.get_num_threads(), gpu='none')
    if device.type == 'cuda':
        env['gpu'] = torch.cuda.get_device_name(device)
        env['capability'] = '.'.join(
            map(str, torch.cuda.get_device_capability(device)))
    for pkg in ('triton', 'mmpretrain', 'timm'):
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
        ]
    table = PrettyTable(['model', 'setting', 'ĀY path', 'reps', 'step ms',
                         '× CutMix', 'step MiB', '×', 'peak MiB', '× ',
                         'compile s', 'graphs', 'note'])
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
        table.add_row([
            r['model'], r['setting'], path, r['reps'],
            _f(r['step_s'] and r['step_s'] * 1e3, '.1f'),
            _f(r['step_ratio'], '.3f'), _f(r['step_mib'], '.1f'),
            _f(r['mem_ratio'], '.3f'), _f(r['peak_mib'], '.1f'),
            _f(r['peak_ratio'], '.3f'), _f(r['compile_s'], '.1f'), graphs,
            note])
    table.set_style(TableStyle.MARKDOWN)
    table.align = 'l'
    lines.append(table.get_string())
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
                        'check')
    parser.add_argument('--no-tests', dest='tests', action='store_false',
                        help='no sync check')
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
    (the step timings are :func:`tlalign_mm.testing.steps.step`'s)."""
    args = parse_args(argv)
    budget = Budget(args.budget_s, clock)
    device = torch.device(args.device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise SystemExit('--device cuda: torch sees no CUDA device (use '
                         '--device cpu --tiny for the dry run)')
    cfg = dict(TINY if args.tiny else FULL)
    if args.reps:
        cfg['reps'] = args.reps
    zoo = TINY_ZOO if args.tiny else steps.MODELS_ZOO
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
        spec = zoo[name]
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
                base = steps.build(spec, 'cutmix', cfg['num_classes'])
                state = base.state_dict()
                models[name] = dict(state=state, paths=detect_paths(
                    spec, cfg, data, device, state))
            settings, note = measure(
                spec, mode, cfg, data, device, args, models[name]['paths'],
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
    sync = dict(model=None, mixing='not run (--no-tests)',
                model_step='not run (--no-tests)')
    if args.tests:
        name = args.models[0]
        if budget.left() > 0 and name in models:
            try:
                sync = sync_check(zoo[name], cfg, data, device, args,
                                  models[name]['state'])
            except Exception as err:  # noqa: BLE001  (reported, not fatal)
                sync = dict(mixing='failed: ' + failure(err),
                            model_step='not run')
            sync['model'] = name
        else:
            sync = dict(model=args.models[0], mixing='not run: budget spent',
                        model_step='not run: budget spent')
    report = dict(
        date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
        environment=env,
        config=dict(cfg, bf16=args.bf16, tiny=args.tiny,
                    compile_backend=args.compile_backend,
                    models=args.models, modes=args.modes),
        rows=rows, not_measured=not_measured, sync_check=sync,
        budget=dict(budget_s=args.budget_s, spent_s=budget.elapsed(),
                    measurements=budget.measurements,
                    stop=budget.note()))
    table = markdown(report)
    mmengine.dump(report, osp.join(args.out, 'gpu_report.json'), indent=1)
    with open(osp.join(args.out, 'gpu_report.md'), 'w') as f:
        f.write(table)
    print(table, flush=True)
    return report


if __name__ == '__main__':
    main()
