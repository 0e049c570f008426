# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Load OpenMMLab checkpoints with ``torch.load(weights_only=True)``, safely.

Since torch 2.6, :func:`torch.load` defaults to ``weights_only=True`` and
refuses every pickled global that is not allow-listed. Checkpoints written
by mmengine's :class:`~mmengine.runner.Runner` hold more than tensors:

* ``message_hub``: :class:`mmengine.logging.HistoryBuffer` objects holding
  numpy arrays, plus numpy scalars (``eta``, ``best_score``). A
  ``HistoryBuffer`` also pickles its statistics methods as
  ``getattr(HistoryBuffer, 'mean')`` and so on;
* ``param_schedulers``: mmengine's ``OneCycleParamScheduler`` stores its
  annealing function, pickled as
  ``getattr(OneCycleParamScheduler, '_annealing_cos')``;
* ``meta.dataset_meta``: classes/palette (plain tuples and lists).

This module makes them loadable **without ever turning ``weights_only``
off**, and without giving a file any way to run code, crash the process or
change process-wide state:

1. :data:`OPENMMLAB_SAFE_GLOBALS` is allow-listed with
   :func:`torch.serialization.add_safe_globals`
   (:func:`allow_openmmlab_checkpoints`; ``import tlalign_mm`` does it and
   nothing else). The pickle names a checkpoint uses are bound to
   *validating rebuilders*, not to the real classes:

   * ``numpy.dtype`` -> :func:`_rebuild_dtype`: only plain numeric, bool
     and string dtypes, and only with the exact state numpy itself pickles
     for them. numpy would otherwise apply any pickled state, including
     flags that make a ``float64`` or ``bytes`` dtype claim to hold Python
     objects: numpy then reads raw file bytes as object pointers and the
     process dies (SIGSEGV) while loading.
   * ``numpy._core.multiarray._reconstruct`` / ``scalar`` (and their numpy
     1.x names): arrays and scalars are rebuilt from a validated dtype and
     a byte string of exactly the right length.
   * ``mmengine...HistoryBuffer``: rebuilt through its constructor from
     validated arrays. ``HistoryBuffer.__setstate__`` would update the
     *class-wide* ``_statistics_methods`` dict from the file, so that one
     crafted file could make every ``statistics('mean')`` in the process
     return the max.
   * ``builtins.getattr`` -> :func:`restricted_getattr`, which resolves
     only the attribute lookups in :data:`ALLOWED_ATTRIBUTES`. The real
     ``getattr`` lets a pickle walk from any allowed global to
     ``builtins.exec`` and call it through
     ``torch._tensor._rebuild_from_type_v2`` (allowed by torch).

2. The loaders (:func:`load_checkpoint_weights_only` and one per mmengine
   scheme: local files, ``http(s)://``, ``torchvision://``,
   ``open-mmlab://``, ``mmcls://``, ``s3://``/``petrel://``, ``pavi://``)
   pass ``weights_only=True`` explicitly, so
   ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` cannot turn it off; they name an
   empty, truncated, corrupt or non-checkpoint file as such, and after the
   load they walk the result (:func:`check_loaded`) and refuse any numpy
   object dtype, structured dtype or array holding objects before anything
   uses it.

   :func:`install_safe_loaders` registers them as mmengine's
   :class:`~mmengine.runner.CheckpointLoader` schemes (every scheme
   mmengine knows, and a refusal for any other). It is an explicit call:
   ``tools/train.py`` and ``tools/test.py`` make it, and a config opts in
   with one line::

       custom_imports = dict(imports=['tlalign_mm', 'tlalign_mm.safe_loading'])

   (importing :mod:`tlalign_mm.safe_loading` installs them).
"""
import io
import math
import os
import os.path as osp
import pickle
import re
import tempfile
import zipfile
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import urlparse

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

__all__ = [
    'ALLOWED_ATTRIBUTES', 'NUMPY_REBUILDERS', 'OPENMMLAB_SAFE_GLOBALS',
    'CheckpointFileError',
    'UnsafeCheckpointError', 'allow_openmmlab_checkpoints', 'check_loaded',
    'install_safe_loaders', 'load_checkpoint_weights_only',
    'load_from_local_weights_only', 'load_url_weights_only',
    'restricted_getattr'
]


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint holds something outside the weights-only allow-list,
    or an allowed type with a state that fails validation.

    Raised before the refused item is imported, created, called or applied:
    the restricted unpickler of ``torch.load(weights_only=True)`` stops at
    the first refused item.
    """


class CheckpointFileError(ValueError):
    """A file is not a loadable checkpoint: empty, truncated, corrupt, or
    not written by ``torch.save`` at all."""


# ---------------------------------------------------------------------------
# Validating rebuilders bound to the pickle names checkpoints use
# ---------------------------------------------------------------------------


def _refuse(reason: str) -> 'UnsafeCheckpointError':
    return UnsafeCheckpointError(reason)


class _AttributeOwner:
    """Stand-in for a class that checkpoints only name as an attribute owner.

    ``OneCycleParamScheduler`` appears in checkpoints solely as the first
    argument of ``getattr(OneCycleParamScheduler, '_annealing_cos')``.
    Binding its pickle name to this inert, non-callable token (instead of
    the class) lets :func:`restricted_getattr` resolve that attribute while
    the class itself can never be instantiated or called by a pickle.
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __repr__(self) -> str:
        return f'<allow-listed attribute owner {_qualname(self.cls)}>'


_ONE_CYCLE_OWNER = _AttributeOwner(OneCycleParamScheduler)
#: Bound to the pickle name ``numpy.ndarray``: only ever the first argument
#: of ``_reconstruct``; a pickle cannot call or instantiate it.
_NDARRAY_TOKEN = _AttributeOwner(np.ndarray)

# Plain numbers, bool and fixed-width strings: what Runner checkpoints hold.
# Object ('O'), void/structured ('V'), datetime ('M', 'm') and complex dtypes
# are refused.
_DTYPE_SPEC_RE = re.compile(r'(b1|[iu][1248]|f[248]|[US]\d{1,6})')


class _DTypeSpec:
    """What ``numpy.dtype('f8', False, True)`` unpickles to, until its BUILD
    state is validated.

    numpy pickles a dtype as a call followed by a BUILD step that sets its
    state (byte order, item size, fields, flags). The state is compared
    with the one numpy itself pickles for the same dtype; only then is the
    canonical ``np.dtype`` made. A standalone dtype in a checkpoint stays
    this placeholder until :func:`check_loaded` swaps it for the dtype.
    """

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.validated: Optional[np.dtype] = None

    def __setstate__(self, state: Any) -> None:
        spec = getattr(self, 'spec', None)
        if spec is None:
            raise _refuse('a numpy dtype state without its dtype')
        if not (type(state) is tuple and all(
                type(x) in (int, str, type(None)) for x in state)):
            raise _refuse(f'numpy dtype {spec!r} with a non-standard pickled '
                          f'state {_short(state)}')
        endian = state[1] if len(state) > 1 else None
        dtype = np.dtype(spec)
        if endian in ('<', '>') and dtype.byteorder != '|':
            dtype = dtype.newbyteorder(endian)
        canonical = dtype.__reduce__()[2]
        if state != canonical:
            raise _refuse(
                f'numpy dtype {spec!r} with pickled state {state!r}, not the '
                f'state numpy writes for it ({canonical!r}); a crafted state '
                'can make numpy read raw file bytes as Python object pointers')
        self.validated = dtype

    def __repr__(self) -> str:
        return f'<pickled numpy dtype {getattr(self, "spec", "?")!r}>'


def _rebuild_dtype(spec: Any, align: Any = False, copy: Any = True):
    """Bound to the pickle name ``numpy.dtype``."""
    if type(spec) is not str or not _DTYPE_SPEC_RE.fullmatch(spec):
        raise _refuse(
            f'numpy dtype {_short(spec)}: only plain bool, integer, float '
            'and fixed-width string dtypes are allowed (not object, '
            'structured, datetime or complex ones)')
    if align is not False or type(copy) is not bool:
        raise _refuse(f'numpy dtype {spec!r} with align={align!r}, '
                      f'copy={_short(copy)}')
    return _DTypeSpec(spec)


def _validated_dtype(dtype: Any, what: str) -> np.dtype:
    if not isinstance(dtype, _DTypeSpec) or dtype.validated is None:
        raise _refuse(f'{what} with dtype {_short(dtype)}, not a validated '
                      'numpy dtype')
    return dtype.validated


class _CheckedArray(np.ndarray):
    """What ``_reconstruct(numpy.ndarray, ...)`` unpickles to.

    Its BUILD state ``(version, shape, dtype, is_fortran, data)`` is
    validated (a validated dtype, a shape of non-negative ints, exactly
    ``prod(shape) * itemsize`` bytes) before numpy sees it. It pickles, and
    behaves, as a plain ``ndarray``; :func:`check_loaded` turns it into one.
    """

    def __setstate__(self, state: Any) -> None:
        if not (type(state) is tuple and len(state) == 5):
            raise _refuse(f'numpy array with pickled state {_short(state)}')
        version, shape, dtype, is_fortran, data = state
        dtype = _validated_dtype(dtype, 'numpy array')
        if not (version == 1 and type(version) is int
                and type(is_fortran) is bool):
            raise _refuse(f'numpy array state version {version!r}, '
                          f'is_fortran {_short(is_fortran)}')
        if not (type(shape) is tuple
                and all(type(n) is int and n >= 0 for n in shape)):
            raise _refuse(f'numpy array of shape {_short(shape)}')
        if type(data) is str:  # Python 2 pickles (e.g. the CIFAR files)
            data = data.encode('latin1')
        if type(data) not in (bytes, bytearray):
            raise _refuse(f'numpy array data of type {type(data).__name__}')
        expected = math.prod(shape) * dtype.itemsize
        if len(data) != expected:
            raise _refuse(f'numpy array of shape {shape} and dtype {dtype} '
                          f'with {len(data)} bytes of data ({expected} '
                          'expected)')
        np.ndarray.__setstate__(self,
                                (version, shape, dtype, is_fortran, data))

    def __reduce__(self):
        return self.view(np.ndarray).__reduce__()

    def __reduce_ex__(self, protocol):
        return self.view(np.ndarray).__reduce_ex__(protocol)


def _rebuild_array(subtype: Any, shape: Any, typecode: Any) -> np.ndarray:
    """Bound to the pickle names of numpy's ``_reconstruct``."""
    if subtype is not _NDARRAY_TOKEN:
        raise _refuse(f'numpy _reconstruct of {_short(subtype)} (only plain '
                      'numpy.ndarray is allowed)')
    return np.ndarray.__new__(_CheckedArray, (0, ), 'b')


def _rebuild_scalar(dtype: Any, data: Any = None):
    """Bound to the pickle names of numpy's ``scalar``."""
    dtype = _validated_dtype(dtype, 'numpy scalar')
    if type(data) is not bytes or len(data) != dtype.itemsize:
        raise _refuse(f'numpy scalar of dtype {dtype} with data '
                      f'{_short(data)} ({dtype.itemsize} bytes expected)')
    return np.frombuffer(data, dtype=dtype, count=1)[0].copy()


#: The statistics a ``HistoryBuffer`` pickles, each bound to its own method.
_HISTORY_STATISTICS = ('min', 'max', 'current', 'mean')
_HISTORY_KEYS = {'max_length', '_log_history', '_count_history'}


class _CheckedHistoryBuffer(HistoryBuffer):
    """What a pickled :class:`HistoryBuffer` unpickles to.

    ``HistoryBuffer.__setstate__`` updates the class-wide
    ``_statistics_methods`` dict with the file's ``statistics_methods``.
    Here the state is validated instead (1-D numeric histories of equal
    length, a positive ``max_length``, statistics that are exactly the
    default methods under their own names) and the buffer is rebuilt by
    ``HistoryBuffer.__init__``, which only adds the default statistics (as
    every ``HistoryBuffer()`` does). The object then *is* a
    ``HistoryBuffer``.
    """

    def __init__(self, *args, **kwargs):  # a pickle may only BUILD it
        raise _refuse('a HistoryBuffer constructed by the pickle (only '
                      'rebuilding from its pickled state is allowed)')

    def __setstate__(self, state: Any) -> None:
        if type(state) is not dict:
            raise _refuse(f'HistoryBuffer state {_short(state)}')
        state = dict(state)
        methods = state.pop('statistics_methods', {})
        if set(state) != _HISTORY_KEYS:
            raise _refuse(f'HistoryBuffer state with keys {sorted(state)} '
                          f'(expected {sorted(_HISTORY_KEYS)})')
        if type(methods) is not dict or any(
                name not in _HISTORY_STATISTICS
                or fn is not getattr(HistoryBuffer, name)
                for name, fn in methods.items()):
            raise _refuse(
                'HistoryBuffer statistics_methods '
                f'{ {k: _describe(v) for k, v in dict(methods).items()} }: '
                'only the default methods under their own names are allowed '
                '(HistoryBuffer.__setstate__ would install these for every '
                'HistoryBuffer in the process)')
        max_length = state['max_length']
        if type(max_length) is not int or max_length <= 0:
            raise _refuse(f'HistoryBuffer max_length {_short(max_length)}')
        logs, counts = state['_log_history'], state['_count_history']
        for name, value in (('_log_history', logs),
                            ('_count_history', counts)):
            if not (isinstance(value, np.ndarray) and value.ndim == 1
                    and value.dtype.kind in 'biuf'):
                raise _refuse(f'HistoryBuffer {name} {_short(value)}: a 1-D '
                              'numeric numpy array is expected')
        if len(logs) != len(counts):
            raise _refuse('HistoryBuffer histories of different lengths '
                          f'({len(logs)} and {len(counts)})')
        HistoryBuffer.__init__(self, logs.view(np.ndarray),
                               counts.view(np.ndarray), max_length)
        self.__class__ = HistoryBuffer


#: ``(owner, attribute)`` pairs that :func:`restricted_getattr` resolves.
#: ``HistoryBuffer``'s default statistics methods are pickled in every
#: ``message_hub``; the ``OneCycleParamScheduler`` annealing functions in the
#: ``param_schedulers`` state of ``OneCycleLR``/``OneCycleMomentum``.
ALLOWED_ATTRIBUTES = frozenset({
    (HistoryBuffer, 'min'),
    (HistoryBuffer, 'max'),
    (HistoryBuffer, 'mean'),
    (HistoryBuffer, 'current'),
    (OneCycleParamScheduler, '_annealing_cos'),
    (OneCycleParamScheduler, '_annealing_linear'),
})
_OWNERS = {
    _ONE_CYCLE_OWNER: OneCycleParamScheduler,
    _CheckedHistoryBuffer: HistoryBuffer,
}


def _qualname(obj: Any) -> str:
    module = getattr(obj, '__module__', None) or type(obj).__module__
    name = getattr(obj, '__qualname__', None) or type(obj).__qualname__
    return f'{module}.{name}'


def _describe(obj: Any) -> str:
    """Short, side-effect free description of an unpickled object."""
    if obj is restricted_getattr:
        return 'builtins.getattr'
    if obj is _CheckedHistoryBuffer:
        return _qualname(HistoryBuffer)
    if isinstance(obj, _AttributeOwner):
        return _qualname(obj.cls)
    if isinstance(obj, type) or callable(obj) and hasattr(obj, '__qualname__'):
        return _qualname(obj)
    return f'<{_qualname(type(obj))} object>'


def _short(obj: Any) -> str:
    """``repr`` of plain values (shortened), a description of others."""
    if type(obj) in (int, float, bool, str, bytes, type(None), tuple):
        text = repr(obj)
        return text if len(text) <= 80 else text[:77] + '...'
    return _describe(obj)


def restricted_getattr(owner: Any, name: Any) -> Any:
    """Replacement for ``builtins.getattr`` inside weights-only unpickling.

    Pickle protocol 2 (the one ``torch.save`` uses) stores functions with a
    dotted ``__qualname__`` as ``getattr(owner, name)``. Only the pairs in
    :data:`ALLOWED_ATTRIBUTES` are resolved; everything else raises
    :class:`pickle.UnpicklingError` before any attribute is read.
    """
    cls = _OWNERS.get(owner, owner) if isinstance(
        owner, (type, _AttributeOwner)) else owner
    allowed = False
    if type(name) is str and isinstance(cls, type):
        allowed = (cls, name) in ALLOWED_ATTRIBUTES
    if not allowed:
        raise pickle.UnpicklingError(
            f'getattr({_describe(owner)}, {name!r}) is not an allow-listed '
            'attribute lookup (only the pairs in '
            'tlalign_mm.checkpoint_safety.ALLOWED_ATTRIBUTES are resolved: '
            'the builtin getattr would let a pickle reach and call '
            'arbitrary functions)')
    return getattr(cls, name)


# A name no pickle can spell (GLOBAL reads module and name one line each):
# the internal classes are allowed as BUILD targets, never by name.
_UNREACHABLE = '\n<tlalign_mm internal, not loadable by name: {}>'


def _build_safe_globals() -> List[Tuple[Any, str]]:
    items: List[Tuple[Any, str]] = [
        (_rebuild_dtype, 'numpy.dtype'),
        (_NDARRAY_TOKEN, 'numpy.ndarray'),
        (_CheckedHistoryBuffer, _qualname(HistoryBuffer)),
        (restricted_getattr, 'builtins.getattr'),
        (_ONE_CYCLE_OWNER, _qualname(OneCycleParamScheduler)),
    ]
    # numpy 2.x names, and the numpy 1.x names of checkpoints saved before.
    for module in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        items.append((_rebuild_array, f'{module}._reconstruct'))
        items.append((_rebuild_scalar, f'{module}.scalar'))
    for cls in (_DTypeSpec, _CheckedArray):
        items.append((cls, _UNREACHABLE.format(cls.__name__)))
    return items


#: ``(object, pickle name)`` pairs passed to
#: :func:`torch.serialization.add_safe_globals`.
OPENMMLAB_SAFE_GLOBALS: List[Tuple[Any, str]] = _build_safe_globals()

#: The validating rebuilders of plain numpy arrays, by pickle name: what a
#: restricted :class:`pickle.Unpickler` may resolve for numpy data files
#: (:mod:`tlalign_mm.datasets.cifar`). Run :func:`check_loaded` on the
#: result.
NUMPY_REBUILDERS: Dict[str, Any] = {
    name: obj
    for obj, name in OPENMMLAB_SAFE_GLOBALS if name.startswith('numpy')
}


def allow_openmmlab_checkpoints() -> None:
    """Allow-list :data:`OPENMMLAB_SAFE_GLOBALS` for weights-only loading.

    Idempotent; ``import tlalign_mm`` calls it. It changes nothing else:
    mmengine's loaders are only replaced by :func:`install_safe_loaders`.
    """
    torch.serialization.add_safe_globals(OPENMMLAB_SAFE_GLOBALS)


# ---------------------------------------------------------------------------
# After the load: refuse objects-in-disguise, swap placeholders
# ---------------------------------------------------------------------------

_MAX_DEPTH = 100


def _check_dtype(dtype: np.dtype, where: str) -> None:
    if dtype.hasobject or dtype.fields is not None \
            or dtype.subdtype is not None or dtype.kind not in 'biufSU':
        raise _refuse(f'{where}: numpy dtype {dtype!r} (object, structured '
                      'or non-numeric dtypes are refused)')


def check_loaded(obj: Any, where: str = 'checkpoint') -> Any:
    """Walk a weights-only load result; refuse what must not be used.

    Refuses numpy dtypes, arrays and scalars whose dtype holds objects, is
    structured or has a sub-array, and anything nested deeper than
    ``_MAX_DEPTH``. Turns validated arrays into plain ``np.ndarray`` and
    dtype placeholders into ``np.dtype``. Containers are updated in place
    (tuples are rebuilt); shared and cyclic references are preserved.

    Returns:
        The checked object (``obj`` itself unless it is a placeholder or a
        tuple that held one).

    Raises:
        UnsafeCheckpointError: with the path of the refused item.
    """
    done: Dict[int, Any] = {}

    def visit(value: Any, path: str, depth: int) -> Any:
        key = id(value)
        if key in done:
            return done[key]
        if depth > _MAX_DEPTH:
            raise _refuse(f'{path}: nested more than {_MAX_DEPTH} levels')
        kind = type(value)
        if kind in (int, float, bool, str, bytes, complex, type(None)) \
                or isinstance(value, (torch.Tensor, torch.Size, torch.dtype,
                                      torch.device)):
            return value
        if isinstance(value, _DTypeSpec):
            done[key] = result = _validated_dtype(value, path)
            return result
        if isinstance(value, np.dtype):
            _check_dtype(value, path)
            return value
        if isinstance(value, (np.ndarray, np.generic)):
            _check_dtype(value.dtype, path)
            result = value.view(np.ndarray) if isinstance(
                value, _CheckedArray) else value
            done[key] = result
            return result
        done[key] = value  # before recursing: cycles end here
        if isinstance(value, dict):  # dict, OrderedDict, Counter
            items = [(visit(k, f'{path} key', depth + 1),
                      visit(v, f'{path}[{k!r}]', depth + 1))
                     for k, v in list(value.items())]
            value.clear()
            value.update(items)
            return value
        if isinstance(value, list):
            value[:] = [
                visit(v, f'{path}[{i}]', depth + 1)
                for i, v in enumerate(value)
            ]
            return value
        if isinstance(value, tuple):
            items = [
                visit(v, f'{path}[{i}]', depth + 1)
                for i, v in enumerate(value)
            ]
            if all(a is b for a, b in zip(items, value)):
                return value
            result = type(value)(items) if kind is tuple else \
                type(value)(*items)
            done[key] = result
            return result
        if isinstance(value, (set, frozenset)):
            items = {visit(v, f'{path} item', depth + 1) for v in value}
            if isinstance(value, set):
                value.clear()
                value.update(items)
                return value
            done[key] = result = frozenset(items)
            return result
        if isinstance(value, bytearray):
            return value
        if isinstance(value, HistoryBuffer):
            for name, item in list(vars(value).items()):
                vars(value)[name] = visit(item, f'{path}.{name}', depth + 1)
            return value
        # Anything else the unpickler produced is an allow-listed global
        # (a function, a token): leave it.
        return value

    return visit(obj, where, 0)


# ---------------------------------------------------------------------------
# The load itself, with one clear message per failure
# ---------------------------------------------------------------------------

_ZIP_MAGIC = b'PK\x03\x04'
# torch's legacy (pre-1.6, non-zip) format starts with a pickled magic number
_LEGACY_MAGIC = pickle.dumps(
    torch.serialization.MAGIC_NUMBER,
    protocol=torch.serialization.DEFAULT_PROTOCOL)
_UNSAFE_GLOBAL_RE = re.compile(r'GLOBAL (\S+) was not an allowed global')
_TORCH_DOCS_HINT = '\n\nCheck the documentation of torch.load'


def _refusal_reason(error: BaseException) -> str:
    """The unpickler's own reason, without torch's generic advice."""
    message = str(error)
    match = _UNSAFE_GLOBAL_RE.search(message)
    if match:
        return f'unsupported global {match.group(1)}'
    # Drop torch's advice (docs link, "re-run with weights_only=False") and
    # keep the line that says what the restricted unpickler refused.
    message = message.split(_TORCH_DOCS_HINT)[0]
    message = message.replace(torch.serialization.UNSAFE_MESSAGE, '')
    message = message.split('WeightsUnpickler error:')[-1]
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    reason = lines[-1] if lines else type(error).__name__
    return reason.split('. Please use')[0].strip()


def _unsafe_globals(f: Union[str, io.BytesIO]) -> List[str]:
    """Statically list the refused globals (reads opcodes, runs nothing)."""
    try:
        if not isinstance(f, str):
            f.seek(0)
        return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(f))
    except Exception:  # legacy (non-zip) format, torchscript, corrupt file
        return []


def _unsafe_checkpoint_error(source: str, inspect: Optional[str],
                             f: Union[str, io.BytesIO],
                             error: BaseException) -> UnsafeCheckpointError:
    offending = _unsafe_globals(f)
    if offending:
        what = 'refused global(s): ' + ', '.join(offending)
    else:
        what = 'refused: ' + _refusal_reason(error)
    lines = [
        f'Refused to load checkpoint {source!r}: it holds pickled objects '
        'outside the OpenMMLab weights-only allow-list, or allowed types '
        f'with a state that fails validation ({what}). Nothing '
        'from the file was executed and no process-wide state was changed: '
        'torch.load(weights_only=True) stopped at the first refused item, '
        'before importing, creating, calling or applying it.',
        'To proceed safely:',
    ]
    if inspect is not None:
        lines.append(
            '  * inspect what the file references, without loading it: '
            'torch.serialization.get_unsafe_globals_in_checkpoint('
            f'{inspect!r});')
    lines += [
        '  * re-save a tensors-only checkpoint in an environment you trust, '
        "e.g. torch.save({'state_dict': model.state_dict()}, path), and "
        'load that instead;',
        '  * if the listed names are plain data types from a source you '
        'trust, allow-list exactly those with '
        'torch.serialization.add_safe_globals([...]) before loading.',
    ]
    return UnsafeCheckpointError('\n'.join(lines))


def _file_error(source: str, problem: str) -> CheckpointFileError:
    return CheckpointFileError(
        f'{source!r} {problem}. Pass a checkpoint written by torch.save '
        '(e.g. a work_dirs/<config>/epoch_N.pth, iter_N.pth or last.pth); '
        'after an interrupted run, `tools/train.py CONFIG --resume` picks '
        'the newest intact checkpoint of the work dir by itself.')


def _check_format(f: Union[str, io.BytesIO], source: str) -> None:
    """One clear message for empty, foreign, truncated and TorchScript
    files, before torch.load sees them (reads the head and the zip
    directory only)."""
    if isinstance(f, str):
        size = osp.getsize(f)
        with open(f, 'rb') as handle:
            head = handle.read(len(_LEGACY_MAGIC))
    else:
        size = len(f.getbuffer())
        head = bytes(f.getbuffer()[:len(_LEGACY_MAGIC)])
    if size == 0:
        raise _file_error(source, 'is empty (0 bytes): an interrupted save '
                          'leaves such files, it holds no checkpoint')
    if head.startswith(_LEGACY_MAGIC):
        return
    if not head.startswith(_ZIP_MAGIC):
        raise _file_error(
            source, 'is not a PyTorch checkpoint (neither the zip archive '
            'torch.save writes nor its legacy format; it starts with '
            f'{head[:8]!r})')
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        raise _file_error(
            source, f'is truncated or corrupt ({size} bytes; its zip '
            'directory is missing or damaged, as an interrupted save leaves '
            'it)') from None
    if any(n.endswith('/constants.pkl') for n in names):
        raise _file_error(source, 'is a TorchScript archive '
                          '(torch.jit.save), not a checkpoint: load it with '
                          'torch.jit.load')
    if not any(n.endswith('/data.pkl') or n == 'data.pkl' for n in names):
        raise _file_error(source, 'is a zip archive without data.pkl, not '
                          'a torch.save checkpoint')


def _load(f: Union[str, io.BytesIO],
          source: str,
          inspect: Optional[str],
          map_location: Union[str, Callable, None],
          mmap: bool = False) -> Any:
    """``torch.load(f, weights_only=True)``, checked before and after.

    Args:
        f: a local path or an in-memory file.
        source (str): how the user named the checkpoint (path or URL).
        inspect (str, optional): a local path to suggest for inspection.
        mmap (bool): map the tensors of a local file instead of reading them.
    """
    _check_format(f, source)
    if not isinstance(f, str):
        f.seek(0)
    try:
        loaded = torch.load(
            f, map_location=map_location, weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as error:
        if 'truncated' in str(error) or 'invalid load key' in str(error):
            raise _file_error(
                source, f'is corrupt ({_refusal_reason(error)})') from None
        raise _unsafe_checkpoint_error(source, inspect, f, error) from None
    except EOFError:
        raise _file_error(source, 'is truncated (the pickle ends early)'
                          ) from None
    except RuntimeError as error:
        if 'PytorchStreamReader' in str(error) or 'zip' in str(error):
            raise _file_error(
                source, 'is truncated or corrupt '
                f'({str(error).splitlines()[0]})') from None
        raise
    try:
        return check_loaded(loaded)
    except UnsafeCheckpointError as error:
        raise UnsafeCheckpointError(
            f'Refused to use checkpoint {source!r}: {error}. It was loaded '
            'with weights_only=True (nothing executed) and refused before '
            'anything used it.') from None


def _local_file(filename: str) -> str:
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    return filename


def load_from_local_weights_only(filename: str,
                                 map_location: Union[str, Callable, None],
                                 mmap: bool = False) -> Any:
    """Load a local checkpoint with ``torch.load(weights_only=True)``.

    mmengine's local-file scheme (prefix ``''``) once
    :func:`install_safe_loaders` ran, so ``runner.resume``, ``load_from``,
    :func:`mmengine.runner.load_checkpoint` and
    ``init_cfg=dict(type='Pretrained', checkpoint='path.pth')`` use it.

    Args:
        filename (str): Local checkpoint file path.
        map_location (str | callable, optional): Same as :func:`torch.load`.
        mmap (bool): map the tensors instead of reading them (cheap reads of
            ``meta``). Defaults to False.

    Returns:
        dict or OrderedDict: The loaded (and checked) checkpoint.

    Raises:
        FileNotFoundError: If ``filename`` does not exist.
        CheckpointFileError: empty, truncated, corrupt or not a checkpoint.
        UnsafeCheckpointError: If the file pickles anything outside the
            allow-list, or an allowed type with a crafted state.
    """
    filename = _local_file(filename)
    return _load(filename, filename, filename, map_location, mmap)


def _download(url: str, model_dir: Optional[str], progress: bool,
              check_hash: bool, file_name: Optional[str]) -> str:
    """``torch.hub.load_state_dict_from_url``'s caching, without the load."""
    if model_dir is None:
        model_dir = osp.join(torch.hub.get_dir(), 'checkpoints')
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or osp.basename(urlparse(url).path)
    cached = osp.join(model_dir, filename)
    if not osp.exists(cached):
        hash_prefix = None
        if check_hash:
            match = torch.hub.HASH_REGEX.search(filename)
            hash_prefix = match.group(1) if match else None
        torch.hub.download_url_to_file(
            url, cached, hash_prefix, progress=progress)
    return cached


def load_url_weights_only(url: str,
                          model_dir: Optional[str] = None,
                          map_location: Union[str, Callable, None] = None,
                          progress: bool = True,
                          check_hash: bool = False,
                          file_name: Optional[str] = None) -> Any:
    """Drop-in for ``torch.utils.model_zoo.load_url`` with weights only.

    Downloads (or reuses the cached copy in ``<torch hub>/checkpoints``)
    like :func:`torch.hub.load_state_dict_from_url`, whose ``weights_only``
    defaults to ``False``, then loads the file like
    :func:`load_from_local_weights_only`.
    """
    cached = _download(url, model_dir, progress, check_hash, file_name)
    if zipfile.is_zipfile(cached):
        with zipfile.ZipFile(cached) as archive:
            members = archive.infolist()
            # torch < 1.6's hub zips held one legacy-format file
            if len(members) == 1 and not members[0].is_dir() \
                    and not members[0].filename.endswith('data.pkl'):
                return _load(io.BytesIO(archive.read(members[0])), url,
                             None, map_location)
    return _load(cached, url, cached, map_location)


def load_from_http_weights_only(filename: str,
                                map_location=None,
                                model_dir: Optional[str] = None,
                                progress: bool = os.isatty(0)) -> Any:
    """mmengine's ``load_from_http`` (rank 0 downloads first), weights only.
    """
    from mmengine.dist import get_dist_info
    rank, world_size = get_dist_info()
    if rank == 0:
        checkpoint = load_url_weights_only(
            filename, model_dir, map_location, progress=progress)
    if world_size > 1:
        torch.distributed.barrier()
        if rank > 0:
            checkpoint = load_url_weights_only(
                filename, model_dir, map_location, progress=progress)
    return checkpoint


def load_from_torchvision_weights_only(filename: str,
                                       map_location=None) -> Any:
    """``torchvision://NAME`` (and ``modelzoo://NAME``), weights only."""
    from mmengine.runner.checkpoint import get_torchvision_models
    name = filename.split('://', 1)[1]
    return load_from_http_weights_only(
        get_torchvision_models()[name], map_location=map_location)


def load_from_openmmlab_weights_only(filename: str,
                                     map_location=None) -> Any:
    """``open-mmlab://NAME`` / ``openmmlab://NAME``, weights only.

    The name is resolved like mmengine's ``load_from_openmmlab`` (its
    model zoo json, ``$MMENGINE_HOME/open_mmlab.json`` and deprecated
    names) to a URL or a file under ``$MMENGINE_HOME``.
    """
    from mmengine.runner.checkpoint import (
        _get_mmengine_home,
        get_deprecated_model_names,
        get_external_models,
    )
    name = filename.split('://', 1)[1]
    name = get_deprecated_model_names().get(name, name)
    url = get_external_models()[name]
    if url.startswith(('http://', 'https://')):
        return load_from_http_weights_only(url, map_location=map_location)
    return load_from_local_weights_only(
        osp.join(_get_mmengine_home(), url), map_location)


def load_from_mmcls_weights_only(filename: str, map_location=None) -> Any:
    """``mmcls://NAME``, weights only."""
    from mmengine.runner.checkpoint import (
        _process_mmcls_checkpoint,
        get_mmcls_models,
    )
    url = get_mmcls_models()[filename[len('mmcls://'):]]
    return _process_mmcls_checkpoint(
        load_from_http_weights_only(url, map_location=map_location))


def load_from_ceph_weights_only(filename: str,
                                map_location=None,
                                backend: str = 'petrel') -> Any:
    """``s3://`` / ``petrel://`` (mmengine's petrel backend), weights
    only."""
    from mmengine.fileio import get_file_backend
    file_backend = get_file_backend(
        filename, backend_args={'backend': backend})
    return _load(
        io.BytesIO(file_backend.get(filename)), filename, None, map_location)


def load_from_pavi_weights_only(filename: str, map_location=None) -> Any:
    """``pavi://`` (downloaded to a temporary directory), weights only."""
    try:
        from pavi import modelcloud
    except ImportError:
        raise ImportError(
            'Please install pavi to load checkpoint from modelcloud.')
    model = modelcloud.get(filename[len('pavi://'):])
    with tempfile.TemporaryDirectory() as tmp_dir:
        downloaded = osp.join(tmp_dir, model.name)
        model.download(downloaded)
        return _load(downloaded, filename, None, map_location)


#: mmengine 0.10.7's schemes (``CheckpointLoader._schemes`` keys) and
#: their weights-only loaders.
SAFE_SCHEMES: Dict[str, Callable] = OrderedDict([
    ('', load_from_local_weights_only),
    ('http://', load_from_http_weights_only),
    ('https://', load_from_http_weights_only),
    ('pavi://', load_from_pavi_weights_only),
    (r'(\S+\:)?s3://', load_from_ceph_weights_only),
    (r'(\S+\:)?petrel://', load_from_ceph_weights_only),
    ('modelzoo://', load_from_torchvision_weights_only),
    ('torchvision://', load_from_torchvision_weights_only),
    ('open-mmlab://', load_from_openmmlab_weights_only),
    ('openmmlab://', load_from_openmmlab_weights_only),
    ('mmcls://', load_from_mmcls_weights_only),
])


def _scheme_loader(filename: str) -> Callable:
    # longest prefix first, as mmengine's CheckpointLoader sorts them
    for prefix in sorted(SAFE_SCHEMES, key=len, reverse=True):
        if re.match(prefix, filename) is not None:
            return SAFE_SCHEMES[prefix]
    return load_from_local_weights_only


def load_checkpoint_weights_only(filename: str,
                                 map_location: Union[str, Callable,
                                                     None] = None) -> Any:
    """Load a checkpoint from any mmengine scheme, weights only.

    Needs no :func:`install_safe_loaders`: it dispatches on the scheme
    itself. See :func:`load_from_local_weights_only` for what is raised.
    """
    allow_openmmlab_checkpoints()
    return _scheme_loader(filename)(filename, map_location)


def _refuse_unknown_scheme(prefix: str) -> Callable:

    def load_refused(filename, map_location=None):
        raise UnsafeCheckpointError(
            f'{filename!r}: the checkpoint scheme {prefix!r} has no '
            'weights-only loader in tlalign_mm.checkpoint_safety, so it is '
            'refused. Download the file and pass its local path.')

    load_refused.__name__ = 'load_from_refused_scheme'
    return load_refused


_INSTALLED = False


def install_safe_loaders() -> None:
    """Route every mmengine checkpoint scheme through the loaders here.

    Idempotent. Allow-lists :data:`OPENMMLAB_SAFE_GLOBALS`, registers the
    :data:`SAFE_SCHEMES` loaders as mmengine's
    :class:`~mmengine.runner.CheckpointLoader` schemes (``force=True``),
    replaces any other registered scheme by a refusal, and makes
    ``CheckpointLoader.load_checkpoint`` refuse a scheme registered later.
    ``weights_only`` is passed explicitly everywhere, so
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` does not turn it off.

    ``tools/train.py`` and ``tools/test.py`` call it; a config opts in with
    ``custom_imports=dict(imports=['tlalign_mm',
    'tlalign_mm.safe_loading'])``.
    """
    global _INSTALLED
    allow_openmmlab_checkpoints()
    if _INSTALLED:
        return
    # Importing the module runs mmengine's own scheme registrations first,
    # so ours below override them rather than the other way round.
    from mmengine.runner import checkpoint as mmengine_checkpoint
    loader_cls = mmengine_checkpoint.CheckpointLoader
    for prefix in list(loader_cls._schemes):
        if prefix not in SAFE_SCHEMES:
            loader_cls.register_scheme(
                prefixes=prefix, loader=_refuse_unknown_scheme(prefix),
                force=True)
    for prefix, loader in SAFE_SCHEMES.items():
        loader_cls.register_scheme(prefixes=prefix, loader=loader, force=True)
    # mmengine's own load_from_http looks ``load_url`` up in its module.
    mmengine_checkpoint.load_url = load_url_weights_only
    original = loader_cls.load_checkpoint.__func__

    def load_checkpoint(cls, filename, map_location=None, logger='current'):
        loader = cls._get_checkpoint_loader(filename)
        if loader not in SAFE_SCHEMES.values() and \
                loader.__name__ != 'load_from_refused_scheme':
            raise UnsafeCheckpointError(
                f'{filename!r}: its checkpoint scheme was registered after '
                'tlalign_mm.checkpoint_safety.install_safe_loaders() and '
                f'would load it with {loader.__name__}, which may unpickle '
                'arbitrary code; refused. Pass a local path.')
        return original(cls, filename, map_location, logger)

    loader_cls.load_checkpoint = classmethod(load_checkpoint)
    _INSTALLED = True

