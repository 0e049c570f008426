"""``load(source)``: read a checkpoint from any scheme, weights only, and
return only what a checkpoint legitimately holds.

* Bounded work before any check: the zip directory is checked before
  ``torch.load`` inflates anything (``torch.save`` writes stored records
  only), and the pickle's opcodes before ``torch.load`` builds anything
  (:func:`_check_pickle`).
* ``torch.load(weights_only=True)`` is called with the argument spelled out
  (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it off); a foreign
  Runner checkpoint's numpy and ``HistoryBuffer`` objects unpickle as inert
  stand-ins, dropped: nothing of numpy or mmengine is built from the file.
* The result is walked against a schema (:data:`RUNNER`, or a bare state
  dict): what our runs', mmengine's, mmpretrain's, mmseg's and mmdet's
  checkpoints hold, each field checked for type, shape and range. The
  message hub keeps known ``runtime_info`` keys only: no path (mmengine's
  ``CheckpointHook`` deletes ``best_ckpt``), no config text (mmengine's
  ``BaseInferencer`` runs it); ``meta['cfg']`` becomes the data it assigns
  (parsed, never run). What does not fit is dropped with one warning, or,
  where no checkpoint holds it, the file is refused.
* The walk visits each object once per schema (the pickle memo can make one
  list appear 2**64 times in a few hundred bytes), within :data:`MAX_DEPTH`
  levels; the tensors it keeps may view at most :data:`VIEW_FACTOR` times
  the file's bytes (many views of one storage, each expanded or cloned by
  whoever reads them, made a 32 MB file cost gigabytes).
* Optimizer and scheduler states are tensors and plain values here; they
  are checked against the optimizer that loads them where it is known
  (:mod:`.training_state`).
"""
import ast
import os
import os.path as osp
import pickletools
import re
import zipfile
from collections import OrderedDict
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlparse

import torch
from mmengine.logging import HistoryBuffer, print_log

from .plain import check_resume_state

#: the largest meta epoch / iter (ImageNet, 300 epochs at batch 1,024, is
#: 375k iterations)
MAX_PROGRESS = 10**9
#: the deepest nesting walked; the most objects the pickle may build
MAX_DEPTH, MAX_OBJECTS = 32, 10**6
#: the longest config text parsed (ours are 4-25k characters; ast.parse
#: takes up to 500 bytes of memory per character)
MAX_CONFIG_CHARS = 2**17
#: the tensors kept may view this many times the file's bytes (weights
#: tied across modules are views of one storage)
VIEW_FACTOR = 4
DTYPES = {getattr(torch, name) for name in 'float16 bfloat16 float32 float64 '
          'complex64 complex128 uint8 int8 int16 int32 int64 bool'.split()}
#: the numpy and mmengine pickle names a foreign Runner checkpoint holds
FOREIGN_GLOBALS = (
    'numpy.dtype', 'numpy.ndarray', 'numpy._core.multiarray._reconstruct',
    'numpy.core.multiarray._reconstruct', 'numpy._core.multiarray.scalar',
    'numpy.core.multiarray.scalar', 'builtins.getattr',
    'mmengine.logging.history_buffer.HistoryBuffer',
    'mmengine.optim.scheduler.param_scheduler.OneCycleParamScheduler')
DROP = object()  # what a schema returns for a value it leaves out
QUIET = object()  # left out without a warning: what mmengine writes itself


class CheckpointError(RuntimeError):
    """A file that is not a loadable, trustworthy checkpoint; the message
    names it and what is wrong."""


def _error(source: str, problem: str) -> CheckpointError:
    return CheckpointError(f'Refused checkpoint {source!r}: {problem}')


class _Dropped:
    """The stand-in for every foreign global: takes anything, keeps none."""
    __init__ = __setstate__ = lambda self, *args, **kwargs: None


class _Walk:
    """One check of a loaded object against a schema: a function ``(walk,
    value, path, depth)`` returning what is kept of ``value`` (in new
    containers) or :data:`DROP`, or raising :meth:`refuse`."""

    def __init__(self, source: str, view_bytes: int):
        self.source, self.dropped, self.memo = source, [], {}
        self.view_bytes = view_bytes  # left for the tensors' views

    def refuse(self, problem: str) -> CheckpointError:
        return _error(self.source, problem)

    def __call__(self, value, schema, path: str = '', depth: int = 0):
        key = (id(value), schema)
        if key not in self.memo:
            if depth > MAX_DEPTH:
                raise self.refuse(f'it nests deeper than {MAX_DEPTH} levels'
                                  f' ({path})')
            kept = DROP if isinstance(value, _Dropped) else \
                schema(self, value, path, depth)
            if kept is DROP:
                self.dropped.append(path)
            self.memo[key] = value, kept  # value kept alive: its id stays
        kept = self.memo[key][1]
        if torch.is_tensor(kept):  # per reference: readers copy each one
            self.view_bytes -= kept.numel() * kept.element_size()
            if self.view_bytes < 0:
                raise self.refuse(
                    f'its tensors view more than {VIEW_FACTOR} times the '
                    f"file's bytes (at {path}: views of shared storage)")
        return kept


def _kind(test):
    """A leaf: the value if ``test(value)``, else dropped."""
    return lambda walk, value, path, depth: value if test(value) else DROP


def _must(schema, what: str):
    """``schema``, refusing the file where it would drop the value."""
    def check(walk, value, path, depth):
        kept = schema(walk, value, path, depth)
        if kept is DROP:  # a huge int has no repr
            small = type(value) in (str, float, bool, type(None)) or \
                type(value) is int and abs(value) < 2**63
            shown = repr(value)[:60] if small else f'a {type(value).__name__}'
            raise walk.refuse(f'{path} = {shown} is not {what}')
        return kept
    return check


def _fields(table: dict):
    """A dict whose values are checked by the schema of the first ``table``
    key (a name or fnmatch pattern) their string or integer key matches;
    other entries dropped, and anything but a dict."""
    def check(walk, value, path, depth):
        if type(value) not in (dict, OrderedDict):
            return DROP
        kept = type(value)()
        for key, item in value.items():
            schema = next((s for pattern, s in table.items() if type(key) in (
                str, int) and fnmatchcase(str(key), pattern)), _NOTHING)
            item = walk(item, schema, f'{path}[{key!r}]' if path else
                        str(key), depth + 1)
            if item is not DROP and item is not QUIET:
                kept[key] = item
        return kept
    return check


def _tensor(walk, value, path, depth):
    """A dense tensor of a plain dtype whose header fits its storage (a zero
    stride can make 8 bytes look like a terabyte)."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        return DROP
    if value.layout != torch.strided or value.dtype not in DTYPES:
        raise walk.refuse(f'{path} is a {value.layout} {value.dtype} tensor '
                          '(checkpoints hold dense tensors of plain dtypes)')
    if value.numel() * value.element_size() > \
            value.untyped_storage().nbytes():
        raise walk.refuse(f'tensor {path} claims {value.numel()} elements, '
                          'more than its storage holds (a crafted header)')
    return value.detach()


def _plain(walk, value, path, depth):
    """Numbers, strings, None, tensors, and lists, tuples and dicts of them;
    a list or tuple is dropped whole if one of its items is."""
    if value is None or type(value) in (str, float, bool):
        return value
    if type(value) is int:  # a wider one: a config's 5,000-digit literal
        return value if -2**63 <= value < 2**63 else DROP
    if torch.is_tensor(value) or type(value) not in (list, tuple):
        return (_tensor if torch.is_tensor(value) else _PLAIN_DICT)(
            walk, value, path, depth)
    items = [walk(v, _plain, f'{path}[{i}]', depth + 1)
             for i, v in enumerate(value)]
    return DROP if any(v is DROP for v in items) else type(value)(items)


def _state_dict(walk, value, path, depth):
    """Tensors under string keys, with the ``_metadata`` (module versions)
    that ``load_state_dict`` reads."""
    kept = _TENSORS(walk, value, path, depth)
    versions = getattr(value, '_metadata', None)
    if kept is not DROP and type(versions) in (dict, OrderedDict):
        kept._metadata = walk(versions, _PLAIN_DICT, f'{path}._metadata',
                              depth + 1)
    return kept


def _history_buffer(walk, value, path, depth):
    """A ``HistoryBuffer`` as :func:`.plain.plain_checkpoint` writes it,
    rebuilt through its constructor (which copies the arrays)."""
    log, count, size = (value.get(k) for k in ('log', 'count', 'max_length')
                        ) if type(value) is dict else (None, ) * 3
    if not (type(log) is type(count) is torch.Tensor and type(size) is int
            and size > 0 and log.dim() == 1 and log.shape == count.shape
            and (log.dtype, count.dtype) == (torch.float64, torch.int64)):
        return DROP
    return HistoryBuffer(*(walk(t, _tensor, path, depth).numpy()
                           for t in (log, count)), size)


def _message_hub(walk, value, path, depth):
    """``MessageHub.state_dict()``'s three dicts (missing ones empty), the
    resumed keys of values kept only (mmengine warns of the others)."""
    hub = _HUB(walk, value, path, depth)
    if hub is DROP:
        return DROP
    hub = {k: hub.get(k, {}) for k in _HUB_PARTS}
    hub['resumed_keys'] = {k: v for k, v in hub['resumed_keys'].items()
                           if k in hub['runtime_info'] or
                           k in hub['log_scalars']}
    return hub


def _config(walk, text, path, depth):
    """A config's text as the data it assigns (parsed, never run), if it is
    at most :data:`MAX_CONFIG_CHARS` long."""
    cfg = parse_config(text) if type(text) is str and \
        len(text) <= MAX_CONFIG_CHARS else {}
    return walk(cfg, _PLAIN_DICT, path, depth) if cfg else DROP


def _resume_state(walk, state, path, depth):
    """:class:`~.hooks.LastCheckpointHook`'s, or the file is refused."""
    try:
        check_resume_state(state)
    except Exception as error:  # noqa: BLE001  any: not a state
        raise walk.refuse(f'its resume_state is not a generator state '
                          f'({type(error).__name__}: {error})') from None
    return state


def _quiet(walk, value, path, depth):
    """Left out without a warning."""
    return QUIET


_NOTHING = _kind(lambda v: False)
_PLAIN_DICT, _TENSORS = _fields({'*': _plain}), _fields({'*': _tensor})
COUNT = _kind(lambda v: type(v) is int and 0 <= v <= MAX_PROGRESS)
SEED = _kind(lambda v: type(v) is int and 0 <= v < 2**32)  # numpy's range
NUMBER = _kind(lambda v: type(v) in (int, float))
PROGRESS = _must(COUNT, f'an integer in [0, {MAX_PROGRESS}]')
_HUB_PARTS = dict(
    log_scalars=_fields({'*': _history_buffer}),
    # what mmengine's hooks record; not best_ckpt / last_ckpt (paths
    # CheckpointHook deletes) nor cfg (config text), which every Runner
    # checkpoint holds: left out quietly
    runtime_info=_fields({
        'cfg': _quiet, 'last_ckpt': _quiet, 'best_ckpt*': _quiet,
        'seed': SEED, 'eta': NUMBER, 'best_score*': NUMBER,
        'keep_ckpt_ids': _kind(lambda v: type(v) is list and all(
            type(i) is int and i >= 0 for i in v)),
        **dict.fromkeys(('epoch', 'iter', 'max_epochs', 'max_iters'), COUNT),
        **dict.fromkeys(('experiment_name', 'mmengine_version', 'loop_stage',
                         'dataset_meta', 'val/*', 'test/*'), _plain)}),
    resumed_keys=_fields({'*': _kind(lambda v: type(v) is bool)}))
_HUB = _fields(_HUB_PARTS)
#: a Runner checkpoint: mmengine's, mmpretrain's, mmseg's, mmdet's, ours,
#: and an export of tools/export_backbone.py
RUNNER = dict(
    meta=_must(_fields({
        'epoch': PROGRESS, 'iter': PROGRESS, 'seed': SEED, 'cfg': _config,
        **dict.fromkeys((
            'dataset_meta', 'CLASSES', 'PALETTE', 'experiment_name', 'time',
            'env_info', '*_version', 'exported_by', 'to', 'layout', 'prefix',
            'loader', 'source*', 'num_*', 'backbone'), _plain)}), 'a dict'),
    state_dict=_must(_state_dict, 'a state dict'),
    ema_state_dict=_state_dict,
    message_hub=_must(_message_hub, 'a message hub (a dict)'),
    optimizer=_plain, param_schedulers=_plain, resume_state=_resume_state)
_RUNNER = _fields(RUNNER)


def _checkpoint(walk, ckpt, path, depth):
    """A Runner checkpoint, or a bare state dict."""
    if type(ckpt) not in (dict, OrderedDict):
        raise walk.refuse(f'it holds a {type(ckpt).__name__}, not a '
                          'checkpoint dict or state dict')
    schema = _RUNNER if set(RUNNER) & set(ckpt) else _state_dict
    return schema(walk, ckpt, path, depth)


def _check_archive(path: str, source: str) -> None:
    """Refuse what is not a ``torch.save`` zip before ``torch.load`` reads
    more than its directory."""
    if not osp.exists(path):
        raise FileNotFoundError(f'Checkpoint {source!r} does not exist')
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise _error(source, 'it is not the zip archive torch.save writes '
                     f'(empty or truncated?): {error}') from None
    with archive:
        records = archive.infolist()
        if any(r.filename.endswith('/constants.pkl') for r in records):
            raise _error(source, 'it is a TorchScript archive '
                         '(torch.jit.save); load it with torch.jit.load')
        packed = [r.filename for r in records if r.compress_type !=
                  zipfile.ZIP_STORED or r.file_size != r.compress_size]
        if packed or sum(r.file_size for r in records) > osp.getsize(path):
            raise _error(source, f'records {packed} are compressed or claim '
                         'more bytes than the file holds: refused before '
                         'inflating')
        pickled = [r for r in records if r.filename.endswith('/data.pkl')]
        if len(pickled) == 1:  # else torch.load names what is wrong
            _check_pickle(archive.read(pickled[0]), source)


#: pushes of values whose hash no file can choose (str, bytes: randomised
#: per process) or that few values share (ints below 2**63, floats)
_HASHABLE = {'BININT', 'BININT1', 'BININT2', 'BINFLOAT', 'BINUNICODE',
             'SHORT_BINSTRING', 'BINBYTES', 'SHORT_BINBYTES', 'NONE',
             'NEWTRUE', 'NEWFALSE'}
#: the most dict keys of other kinds (tuples, wider ints) a file may hold:
#: sharing one hash, n keys cost n**2 / 2 comparisons to insert
MAX_ODD_KEYS = 4096
#: what builds a dict or set from its argument: only from nothing or from a
#: dict (whose keys were counted) is allowed
_FILLS = {'collections OrderedDict', 'collections Counter', 'builtins set',
          '__builtin__ set'}
_UPDATES = ('SETITEM', 'SETITEMS', 'APPEND', 'APPENDS')  # in place
_GETS = ('BINGET', 'LONG_BINGET')


def _slot(name: str, arg, memo: dict, popped: list):
    """What the simulated stack of :func:`_check_pickle` holds for the value
    opcode ``name`` pushes: True (a key of :data:`_HASHABLE`), a global's
    name, ``'dict'``, a tuple of slots, or False."""
    if name in _GETS:
        return memo.get(arg)
    if name in ('EMPTY_TUPLE', 'TUPLE1'):
        return tuple(popped)
    return arg if name == 'GLOBAL' else 'dict' if name == 'EMPTY_DICT' \
        else name in _HASHABLE or name == 'LONG1' and abs(arg) < 2**63


def _check_pickle(data: bytes, source: str) -> None:
    """Refuse, before ``torch.load`` builds anything, a pickle that would
    build more than :data:`MAX_OBJECTS` objects, hold more than
    :data:`MAX_ODD_KEYS` dict keys a file can make share one hash (ints
    ``k * (2**61 - 1)``, tuples of them: 150,000 in 2 MB took minutes), or
    build a dict or set from a list. Only the stack is simulated, from
    ``pickletools``' opcode table."""
    stack, marks, memo, built, odd = [], [], {}, 0, 0
    try:
        for op, arg, _ in pickletools.genops(data):
            name, before, popped = op.name, op.stack_before, []
            keys = stack[-2:-1] if name == 'SETITEM' else \
                stack[marks[-1]::2] if name == 'SETITEMS' and marks else []
            odd += sum(k is not True for k in keys)
            if odd > MAX_ODD_KEYS or name == 'REDUCE' and stack[-2:-1] and \
                    stack[-2] in _FILLS and stack[-1] not in ((), ('dict', )):
                raise _error(source, f'it holds more than {MAX_ODD_KEYS} dict'
                             ' keys other than strings and numbers below '
                             '2**63, or a dict or set built from a list '
                             '(keys sharing one hash take minutes to insert)')
            if pickletools.markobject in before:
                popped = stack[marks.pop() if marks else 0:]
                del stack[len(stack) - len(popped):]
                before = before[:before.index(pickletools.markobject)]
            count = min(len(before) - (name in _UPDATES), len(stack))
            if count > 0:
                popped = stack[-count:] + popped
                del stack[-count:]
            if name in ('BINPUT', 'LONG_BINPUT') and stack:
                memo[arg] = stack[-1]
            if op.stack_after == [pickletools.markobject]:
                marks.append(len(stack))
            elif op.stack_after and name not in _UPDATES:
                stack.append(_slot(name, arg, memo, popped))
                built += name not in _GETS
            if built > MAX_OBJECTS:
                raise _error(source, f'it builds more than {MAX_OBJECTS} '
                             'objects')
    except ValueError as error:  # a bad opcode, a truncated argument
        raise _error(source, f'its pickle is corrupt or crafted ({error})'
                     ) from None


def _torch_load(path: str, source: str, map_location, mmap: bool) -> Any:
    try:
        with torch.serialization.safe_globals([
                (_Dropped, name) for name in FOREIGN_GLOBALS]):
            return torch.load(path, map_location=map_location,
                              weights_only=True, mmap=mmap)
    except Exception as error:  # noqa: BLE001  all named below
        unsafe = re.search(r'GLOBAL ([\w.]*\w)', str(error))
        lines = [s.strip() for s in str(error).splitlines() if s.strip()]
        raise _error(source, f'it pickles objects outside the weights-only '
                     f'allow-list ({unsafe[1]}); nothing from it was executed'
                     if unsafe else 'it is corrupt or crafted (' + next((
                         s for s in lines if 'Unsupported' in s), lines[-1]
                         if lines else type(error).__name__) + ')') from None


class _DictCalls(ast.NodeTransformer):
    """``dict(a=1)`` and ``dict({'.key': 1}, a=2)`` (mmengine's
    ``pretty_text``) as dict displays for :func:`ast.literal_eval`, which
    refuses any other call."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        first = node.args[0] if node.args else ast.Dict([], [])
        if not (isinstance(node.func, ast.Name) and node.func.id == 'dict'
                and len(node.args) <= 1 and isinstance(first, ast.Dict)
                and all(k.arg is not None for k in node.keywords)):
            return node
        return ast.Dict(first.keys + [ast.Constant(k.arg)
                                      for k in node.keywords],
                        first.values + [k.value for k in node.keywords])


def parse_config(text: str) -> dict:
    """A config's text (``meta['cfg']``) as data, never executed: its
    top-level ``name = <literals and dict(...)>`` assignments; any other
    statement, and text that is not Python, is skipped."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    cfg = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            try:  # TypeError: unhashable keys, {[1]: 2}
                cfg[node.targets[0].id] = ast.literal_eval(
                    _DictCalls().visit(node.value))
            except (ValueError, TypeError, RecursionError):
                pass
    return cfg


def _local_path(source: str) -> str:
    """The file of a checkpoint name: model-zoo names through mmengine's
    tables, URLs downloaded into ``<torch hub>/checkpoints`` (as
    :func:`torch.hub.load_state_dict_from_url`)."""
    from mmengine.runner import checkpoint as zoo
    scheme, _, name = source.partition('://')
    if scheme in ('torchvision', 'modelzoo'):
        source = zoo.get_torchvision_models()[name]
    elif scheme in ('open-mmlab', 'openmmlab'):
        source = zoo.get_external_models()[
            zoo.get_deprecated_model_names().get(name, name)]
    if source.startswith(('http://', 'https://')):
        path = osp.join(torch.hub.get_dir(), 'checkpoints',
                        osp.basename(urlparse(source).path))
        if not osp.exists(path):
            os.makedirs(osp.dirname(path), exist_ok=True)
            torch.hub.download_url_to_file(source, path, progress=False)
        return path
    if '://' in source:
        raise _error(source, 'only local paths, http(s)://, torchvision:// '
                     'and open-mmlab:// are read: pass a local path')
    return osp.expanduser(source)


def load(source: str, map_location: Any = 'cpu', mmap: bool = False) -> dict:
    """What the checkpoint ``source`` (a local path, ``http(s)://``,
    ``torchvision://NAME``, ``open-mmlab://NAME``) holds that fits the
    schema, in new containers; ``mmap=True`` maps the tensors.

    Raises:
        FileNotFoundError: a local path that does not exist.
        CheckpointError: anything else wrong with the file, naming it.
    """
    source = str(source)
    path = _local_path(source)
    _check_archive(path, source)
    walk = _Walk(source, VIEW_FACTOR * osp.getsize(path))
    ckpt = walk(_torch_load(path, source, map_location, mmap), _checkpoint)
    if walk.dropped:  # numpy objects of other runs, paths, config text...
        print_log(f'{source}: dropped what no checkpoint holds as it is, '
                  f'never built or used: {", ".join(walk.dropped[:8])}'
                  f'{" ..." * (len(walk.dropped) > 8)}', 'current', 30)
    return ckpt
