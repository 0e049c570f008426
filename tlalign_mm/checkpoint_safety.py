# Copyright (c) tlalign_mm contributors. All rights reserved.
"""Load OpenMMLab checkpoints with ``torch.load(weights_only=True)``.

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

mmengine 0.10.7 calls ``torch.load(filename, map_location=...)`` without
adapting, so resuming, ``load_from`` and ``init_cfg=dict(type='Pretrained')``
fail with ``UnpicklingError``. This module fixes that **without ever turning
``weights_only`` off**:

1. :data:`OPENMMLAB_SAFE_GLOBALS` is allow-listed with
   :func:`torch.serialization.add_safe_globals`. It was derived from real
   checkpoints (an mmpretrain classifier with EMA, an mmseg segmentor and an
   mmdet detector, each trained for a few iterations with ``save_best``)
   with :func:`torch.serialization.get_unsafe_globals_in_checkpoint`, plus
   the types that the unpickler's ``BUILD`` step needs.

   ``builtins.getattr`` is **not** allow-listed: with the real ``getattr``
   a pickle can walk from any allowed global to ``builtins.exec`` and call
   it through ``torch._tensor._rebuild_from_type_v2`` (which torch allows
   by default), i.e. arbitrary code execution. The name
   ``builtins.getattr`` is instead bound to :func:`restricted_getattr`,
   which only resolves the few attributes listed in
   :data:`ALLOWED_ATTRIBUTES`.

2. mmengine's :class:`~mmengine.runner.CheckpointLoader` local scheme
   (prefix ``''``) is replaced by :func:`load_from_local_weights_only`,
   which passes ``weights_only=True`` explicitly and turns a refusal into
   :class:`UnsafeCheckpointError`, naming what was refused and how to
   proceed safely. mmengine's ``http(s)://`` loaders (also used by
   ``torchvision://``, ``open-mmlab://`` and ``mmcls://``) download
   through ``torch.hub.load_state_dict_from_url``, whose ``weights_only``
   defaults to ``False``; they are routed through
   :func:`load_url_weights_only` instead.

Call :func:`allow_openmmlab_checkpoints` once (``import tlalign_mm`` does).
"""
import os.path as osp
import pickle
import re
from typing import Any, Callable, List, Optional, Tuple, Union
from urllib.parse import urlparse

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

__all__ = [
    'ALLOWED_ATTRIBUTES', 'OPENMMLAB_SAFE_GLOBALS', 'UnsafeCheckpointError',
    'allow_openmmlab_checkpoints', 'load_from_local_weights_only',
    'load_url_weights_only', 'restricted_getattr'
]

try:  # numpy >= 2.0
    from numpy._core import multiarray as _np_multiarray
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core import multiarray as _np_multiarray


class UnsafeCheckpointError(pickle.UnpicklingError):
    """A checkpoint references something outside the weights-only allow-list.

    Raised before anything outside the allow-list is imported, created or
    called: the restricted unpickler of ``torch.load(weights_only=True)``
    stops at the first refused item.
    """


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


def _qualname(obj: Any) -> str:
    module = getattr(obj, '__module__', None) or type(obj).__module__
    name = getattr(obj, '__qualname__', None) or type(obj).__qualname__
    return f'{module}.{name}'


def _describe(obj: Any) -> str:
    """Short, side-effect free description of an unpickled object."""
    if obj is restricted_getattr:
        return 'builtins.getattr'
    if isinstance(obj, _AttributeOwner):
        return _qualname(obj.cls)
    if isinstance(obj, type) or callable(obj) and hasattr(obj, '__qualname__'):
        return _qualname(obj)
    return f'<{_qualname(type(obj))} object>'


def restricted_getattr(owner: Any, name: Any) -> Any:
    """Replacement for ``builtins.getattr`` inside weights-only unpickling.

    Pickle protocol 2 (the one ``torch.save`` uses) stores functions with a
    dotted ``__qualname__`` as ``getattr(owner, name)``. Only the pairs in
    :data:`ALLOWED_ATTRIBUTES` are resolved; everything else raises
    :class:`pickle.UnpicklingError` before any attribute is read.
    """
    cls = owner.cls if isinstance(owner, _AttributeOwner) else owner
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


def _numpy_globals() -> List[Tuple[Any, str]]:
    """Numpy objects that pickled arrays, scalars and dtypes refer to."""
    items: List[Tuple[Any, str]] = [(np.ndarray, 'numpy.ndarray'),
                                    (np.dtype, 'numpy.dtype')]
    # Array and scalar reconstructors, under their numpy 2.x name and the
    # numpy 1.x name found in checkpoints saved before numpy 2.
    for module in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        items.append((_np_multiarray._reconstruct, f'{module}._reconstruct'))
        items.append((_np_multiarray.scalar, f'{module}.scalar'))
    # ``np.dtype('f8')`` is pickled as ``numpy.dtype('f8', False, True)``
    # followed by a BUILD step, which the weights-only unpickler only
    # performs on allow-listed types: allow the concrete dtype classes of
    # plain numbers and strings. Object, void (structured) and datetime
    # dtypes are deliberately left out.
    for scalar_type in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                        np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
                        np.float32, np.float64, np.str_, np.bytes_):
        dtype_cls = type(np.dtype(scalar_type))
        items.append((dtype_cls, _qualname(dtype_cls)))
    return items


def _build_safe_globals() -> List[Tuple[Any, str]]:
    items = _numpy_globals()
    items.append((HistoryBuffer, _qualname(HistoryBuffer)))
    items.append((restricted_getattr, 'builtins.getattr'))
    items.append((_ONE_CYCLE_OWNER, _qualname(OneCycleParamScheduler)))
    return items


#: ``(object, pickle name)`` pairs passed to
#: :func:`torch.serialization.add_safe_globals`.
OPENMMLAB_SAFE_GLOBALS: List[Tuple[Any, str]] = _build_safe_globals()

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


def _unsafe_globals(path: Optional[str]) -> List[str]:
    """Statically list the refused globals (reads opcodes, runs nothing)."""
    if path is None or not osp.isfile(path):
        return []
    try:
        found = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        return sorted(found)
    except Exception:  # legacy (non-zip) format, torchscript, corrupt file
        return []


def _unsafe_checkpoint_error(source: str, path: Optional[str],
                             error: BaseException) -> UnsafeCheckpointError:
    offending = _unsafe_globals(path)
    if offending:
        what = 'refused global(s): ' + ', '.join(offending)
    else:
        what = 'refused: ' + _refusal_reason(error)
    inspect_path = path if path is not None else source
    return UnsafeCheckpointError(
        f'Refused to load checkpoint {source!r}: it contains pickled '
        f'objects outside the OpenMMLab weights-only allow-list ({what}). '
        'Nothing from the file was executed: torch.load(weights_only=True) '
        'stopped at the first refused item, before importing, creating or '
        'calling it.\n'
        'To proceed safely:\n'
        '  * inspect what the file references, without loading it: '
        'torch.serialization.get_unsafe_globals_in_checkpoint('
        f'{inspect_path!r});\n'
        '  * re-save a tensors-only checkpoint in an environment you trust, '
        "e.g. torch.save({'state_dict': model.state_dict()}, path), and "
        'load that instead;\n'
        '  * if the listed names are plain data types from a source you '
        'trust, allow-list exactly those with '
        'torch.serialization.add_safe_globals([...]) before loading.')


def load_from_local_weights_only(filename: str,
                                 map_location: Union[str, Callable, None]
                                 ) -> Any:
    """Load a local checkpoint with ``torch.load(weights_only=True)``.

    Registered as mmengine's :class:`~mmengine.runner.CheckpointLoader`
    local-file scheme (prefix ``''``) by
    :func:`allow_openmmlab_checkpoints`, so ``runner.resume``,
    ``load_from``, :func:`mmengine.runner.load_checkpoint` and
    ``init_cfg=dict(type='Pretrained', checkpoint='path.pth')`` use it.

    Args:
        filename (str): Local checkpoint file path.
        map_location (str | callable, optional): Same as :func:`torch.load`.

    Returns:
        dict or OrderedDict: The loaded checkpoint.

    Raises:
        FileNotFoundError: If ``filename`` does not exist.
        UnsafeCheckpointError: If the file pickles anything outside the
            allow-list.
    """
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f'{filename} can not be found.')
    try:
        return torch.load(
            filename, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise _unsafe_checkpoint_error(filename, filename, error) from None


def load_url_weights_only(url: str,
                          model_dir: Optional[str] = None,
                          map_location: Union[str, Callable, None] = None,
                          progress: bool = True,
                          check_hash: bool = False,
                          file_name: Optional[str] = None) -> Any:
    """Drop-in for ``torch.utils.model_zoo.load_url`` with weights only.

    mmengine's ``load_from_http`` (behind the ``http://``, ``https://``,
    ``torchvision://``, ``open-mmlab://`` and ``mmcls://`` schemes) calls
    ``load_url``, i.e. :func:`torch.hub.load_state_dict_from_url`, whose
    ``weights_only`` defaults to ``False``. This wrapper always passes
    ``weights_only=True`` and reports refusals like
    :func:`load_from_local_weights_only`.
    """
    try:
        return torch.hub.load_state_dict_from_url(
            url,
            model_dir=model_dir,
            map_location=map_location,
            progress=progress,
            check_hash=check_hash,
            file_name=file_name,
            weights_only=True)
    except pickle.UnpicklingError as error:
        cache_dir = model_dir or osp.join(torch.hub.get_dir(), 'checkpoints')
        cached = osp.join(cache_dir,
                          file_name or osp.basename(urlparse(url).path))
        raise _unsafe_checkpoint_error(url, cached, error) from None


_APPLIED = False


def allow_openmmlab_checkpoints() -> None:
    """Make OpenMMLab checkpoints loadable with ``weights_only=True``.

    Idempotent. It

    * allow-lists :data:`OPENMMLAB_SAFE_GLOBALS` with
      :func:`torch.serialization.add_safe_globals`;
    * registers :func:`load_from_local_weights_only` as mmengine's local
      checkpoint scheme (``force=True``);
    * makes mmengine's URL loaders use :func:`load_url_weights_only`.

    ``weights_only`` is never switched off.
    """
    global _APPLIED
    if _APPLIED:
        return
    # Importing the module runs mmengine's own scheme registrations first,
    # so ours below override them rather than the other way round.
    from mmengine.runner import checkpoint as mmengine_checkpoint

    torch.serialization.add_safe_globals(OPENMMLAB_SAFE_GLOBALS)
    mmengine_checkpoint.CheckpointLoader.register_scheme(
        prefixes='', loader=load_from_local_weights_only, force=True)
    # ``load_from_http`` looks ``load_url`` up in its module globals.
    mmengine_checkpoint.load_url = load_url_weights_only
    _APPLIED = True
