"""``load(source)``: read a checkpoint from any scheme, weights only.

Nothing in a file is executed or trusted:

* the zip directory is checked before ``torch.load`` inflates anything
  (``torch.save`` writes stored records only, so a deflated record, or
  records larger than the file, are refused);
* ``torch.load(weights_only=True)`` is called with the argument spelled
  out, so ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it off, and with
  torch's stock allow-list: the checkpoints our runs write hold tensors and
  plain Python only (:mod:`.plain`);
* a foreign Runner checkpoint whose only other globals are numpy's and
  mmengine's ``HistoryBuffer`` loads with inert stand-ins for those, which
  are then dropped (message-hub logs, numpy metadata): nothing of numpy or
  mmengine is built from the file;
* ``meta['config']``, a config string mmengine's ``Runner.resume`` would
  execute (``Config.fromstring``), is parsed without executing it and
  replaced by the one value mmengine reads from it (``gpu_ids``);
* ``meta.epoch`` / ``meta.iter`` must be plausible non-negative integers.

Every refusal is a :class:`CheckpointError` naming the file.
"""
import ast
import os
import os.path as osp
import pickle
import zipfile
from typing import Any, List, Optional, Tuple
from urllib.parse import urlparse

import torch
from mmengine.logging import print_log

__all__ = ['CheckpointError', 'MAX_PROGRESS', 'load', 'parse_config']

#: the largest meta epoch / iter accepted (ImageNet, 300 epochs at batch
#: 1,024, is 375k iterations)
MAX_PROGRESS = 10**9

_ZIP_MAGIC = b'PK\x03\x04'
#: the numpy and mmengine pickle names a foreign Runner checkpoint holds
FOREIGN_GLOBALS = (
    'numpy.dtype', 'numpy.ndarray', 'numpy._core.multiarray._reconstruct',
    'numpy.core.multiarray._reconstruct', 'numpy._core.multiarray.scalar',
    'numpy.core.multiarray.scalar', 'builtins.getattr',
    'mmengine.logging.history_buffer.HistoryBuffer',
    'mmengine.optim.scheduler.param_scheduler.OneCycleParamScheduler')


class CheckpointError(RuntimeError):
    """A file that is not a loadable, trustworthy checkpoint; the message
    names it and what is wrong."""


def _error(source: str, problem: str) -> CheckpointError:
    return CheckpointError(f'Refused checkpoint {source!r}: {problem}')


class _Dropped:
    """Inert stand-in for every numpy / HistoryBuffer object of a foreign
    file: it takes any arguments and state and keeps none of them."""

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


def _stand_in(*args, **kwargs) -> _Dropped:
    return _Dropped()


_STAND_INS = [(_Dropped if name.endswith(('ndarray', 'HistoryBuffer',
                                          'OneCycleParamScheduler'))
               else _stand_in, name) for name in FOREIGN_GLOBALS]


def _drop_stand_ins(value: Any, path: str, dropped: List[str]) -> Any:
    """``value`` without the entries that hold a stand-in."""
    if isinstance(value, _Dropped):
        dropped.append(path)
        return _Dropped
    if isinstance(value, dict):
        kept = {}
        for k, v in value.items():
            v = _drop_stand_ins(v, f'{path}[{k!r}]', dropped)
            if v is not _Dropped and not isinstance(k, _Dropped):
                kept[k] = v
        value.clear()
        value.update(kept)
    elif isinstance(value, (list, tuple)):
        items = [_drop_stand_ins(v, f'{path}[{i}]', dropped)
                 for i, v in enumerate(value)]
        if any(v is _Dropped for v in items):
            return _Dropped
        if isinstance(value, list):
            value[:] = items
    return value


def _check_archive(path: str, source: str) -> None:
    """Refuse what ``torch.load`` would choke on, or inflate, before it
    reads anything but the zip directory."""
    if osp.isdir(path):
        raise _error(source, 'it is a directory, not a checkpoint file')
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint {source!r} does not exist')
    size = osp.getsize(path)
    with open(path, 'rb') as f:
        head = f.read(4)
    if size == 0:
        raise _error(source, 'it is empty (an interrupted save leaves such '
                     'files); `tools/train.py CONFIG --resume` picks the '
                     'newest intact checkpoint')
    if head != _ZIP_MAGIC:
        raise _error(source, 'it is not the zip archive torch.save writes '
                     f'(it starts with {head!r}); re-save it with '
                     'torch.save in a current torch')
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise _error(source, f'it is truncated or corrupt ({error})') \
            from None
    names = [r.filename for r in records]
    if any(n.endswith('/constants.pkl') for n in names):
        raise _error(source, 'it is a TorchScript archive (torch.jit.save); '
                     'load it with torch.jit.load')
    if not any(n == 'data.pkl' or n.endswith('/data.pkl') for n in names):
        raise _error(source, 'it is a zip archive without data.pkl, not a '
                     'torch.save checkpoint')
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED or \
                record.file_size != record.compress_size:
            raise _error(
                source, f'record {record.filename!r} is compressed '
                f'({record.compress_size} bytes that would inflate to '
                f'{record.file_size}); torch.save never compresses, so it '
                'was refused before inflating it')
    stored = sum(r.file_size for r in records)
    if stored > size:
        raise _error(source, f'its records claim {stored} bytes, more than '
                     f'the file\'s {size}')


def _reason(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines()
             if line.strip()]
    for line in lines:
        if 'GLOBAL' in line or 'Unsupported' in line:
            return line.split('. Please')[0]
    return lines[-1] if lines else type(error).__name__


def _torch_load(path: str, source: str, map_location, mmap: bool) -> Any:
    try:
        return torch.load(path, map_location=map_location, weights_only=True,
                          mmap=mmap)
    except pickle.UnpicklingError as error:
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:  # noqa: BLE001  a corrupt pickle: reported below
            unsafe = None
        if unsafe is None or not unsafe:
            raise _error(source, f'it is corrupt or crafted '
                         f'({_reason(error)})') from None
        if not set(unsafe) <= set(FOREIGN_GLOBALS):
            raise _error(
                source, 'it pickles objects outside the weights-only '
                f'allow-list ({", ".join(sorted(unsafe))}); nothing from it '
                'was executed. Re-save the tensors you trust with '
                "torch.save({'state_dict': model.state_dict()}, path)"
            ) from None
    except Exception as error:  # noqa: BLE001  crafted headers, bit flips
        raise _error(source, f'it is corrupt or crafted ({_reason(error)})'
                     ) from None
    # a foreign Runner checkpoint: numpy / HistoryBuffer replaced, dropped
    try:
        with torch.serialization.safe_globals(_STAND_INS):
            loaded = torch.load(path, map_location=map_location,
                                weights_only=True, mmap=mmap)
    except Exception as error:  # noqa: BLE001
        raise _error(source, f'it is corrupt or crafted ({_reason(error)})'
                     ) from None
    dropped: List[str] = []
    try:
        loaded = _drop_stand_ins(loaded, 'checkpoint', dropped)
    except RecursionError:
        raise _error(source, 'it is nested too deeply') from None
    if loaded is _Dropped:
        raise _error(source, 'it holds numpy objects only')
    print_log(f'{source} was written with numpy / HistoryBuffer objects; '
              f'{len(dropped)} of them were dropped, never built: '
              f'{", ".join(dropped[:8])}{" ..." if len(dropped) > 8 else ""}',
              logger='current', level=30)
    return loaded


def _check_tensors(value: Any, path: str, source: str) -> None:
    """Refuse tensors whose header claims more elements than their storage
    holds (a zero stride can make 8 bytes look like a terabyte)."""
    if torch.is_tensor(value):
        if value.numel() * value.element_size() > \
                value.untyped_storage().nbytes():
            raise _error(source, f'tensor {path} claims {value.numel()} '
                         'elements, more than its storage holds (a crafted '
                         'header)')
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_tensors(v, f'{path}[{k!r}]', source)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_tensors(v, f'{path}[{i}]', source)


def _literal(node: ast.AST) -> Any:
    """The value of a config expression made of literals and ``dict(...)``
    calls with keyword arguments; anything else raises ValueError."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == 'dict' and len(node.args) <= 1 and \
            all(k.arg is not None for k in node.keywords):
        # dict(a=1) and dict({'.key': 1}), as mmengine's pretty_text writes
        value = _literal(node.args[0]) if node.args else {}
        if not isinstance(value, dict):
            raise ValueError(f'dict() of {type(value).__name__}')
        return dict(value, **{k.arg: _literal(k.value)
                              for k in node.keywords})
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_literal(k): _literal(v)
                for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)


def parse_config(text: str, only: Optional[str] = None) -> dict:
    """A config's pretty text (``meta['cfg']``) as a dict, without
    executing it: top-level ``name = <literal or dict(...)>`` assignments.

    Args:
        only (str, optional): read just this name (other statements are
            skipped, never run).

    Raises:
        ValueError: anything else (calls, imports, names, attributes).
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise ValueError(f'not Python: {error}') from None
    cfg = {}
    for node in tree.body:
        plain = isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name)
        if only is not None and not (plain and node.targets[0].id == only):
            continue
        if not plain:
            raise ValueError(f'line {node.lineno} is not a plain assignment')
        cfg[node.targets[0].id] = _literal(node.value)
    return cfg


def _check_meta(ckpt: dict, source: str) -> None:
    meta = ckpt.get('meta')
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise _error(source, f'its meta is a {type(meta).__name__}, not a '
                     'dict')
    for key in ('epoch', 'iter'):
        value = meta.get(key)
        if key in meta and not (type(value) is int
                                and 0 <= value <= MAX_PROGRESS):
            raise _error(source, f'meta[{key!r}] = {value!r} is not an '
                         f'integer in [0, {MAX_PROGRESS}]')
    if 'config' in meta:
        # Runner.resume executes it to read gpu_ids: keep just that value
        text = meta.pop('config')
        try:
            gpu_ids = parse_config(text, 'gpu_ids').get('gpu_ids') \
                if isinstance(text, str) else None
        except ValueError:
            gpu_ids = None
        if isinstance(gpu_ids, (list, tuple)) and \
                all(type(i) is int for i in gpu_ids):
            meta['config'] = f'gpu_ids = {list(gpu_ids)!r}\n'


def _resolve(source: str) -> Tuple[str, Optional[str]]:
    """``(local path, URL or None)`` of a checkpoint name; the model-zoo
    schemes are resolved with mmengine's tables."""
    from mmengine.runner import checkpoint as zoo
    url = source
    for prefix in ('torchvision://', 'modelzoo://'):
        if source.startswith(prefix):
            url = zoo.get_torchvision_models()[source[len(prefix):]]
    for prefix in ('open-mmlab://', 'openmmlab://'):
        if source.startswith(prefix):
            name = source[len(prefix):]
            name = zoo.get_deprecated_model_names().get(name, name)
            url = zoo.get_external_models()[name]
    if url.startswith(('http://', 'https://')):
        cached = osp.join(torch.hub.get_dir(), 'checkpoints',
                          osp.basename(urlparse(url).path))
        return cached, url
    if '://' in url:
        raise _error(source, 'only local paths, http(s):// and the '
                     'torchvision:// / open-mmlab:// model zoos are read; '
                     'download it and pass its local path')
    return osp.expanduser(url), None


def load(source: str, map_location: Any = 'cpu', mmap: bool = False) -> dict:
    """Load the checkpoint ``source`` (a local path, ``http(s)://``,
    ``torchvision://NAME``, ``open-mmlab://NAME``), weights only;
    ``mmap=True`` maps the tensors instead of reading them.

    A URL is downloaded into torch hub's cache (``<hub>/checkpoints``, as
    :func:`torch.hub.load_state_dict_from_url`) and read from there like a
    local file.

    Returns:
        dict: the checkpoint (a Runner checkpoint, a state dict...).

    Raises:
        FileNotFoundError: a local path that does not exist.
        CheckpointError: anything else that is wrong with the file.
    """
    source = str(source)
    path, url = _resolve(source)
    if url is not None and not osp.exists(path):
        os.makedirs(osp.dirname(path), exist_ok=True)
        torch.hub.download_url_to_file(url, path, progress=False)
    _check_archive(path, source)
    ckpt = _torch_load(path, source, map_location, mmap)
    if not isinstance(ckpt, dict):
        raise _error(source, f'it holds a {type(ckpt).__name__}, not a '
                     'checkpoint dict or state dict')
    try:
        _check_tensors(ckpt, 'checkpoint', source)
    except RecursionError:
        raise _error(source, 'it is nested too deeply') from None
    _check_meta(ckpt, source)
    from .plain import restore_message_hub
    if isinstance(ckpt.get('message_hub'), dict):
        ckpt['message_hub'] = restore_message_hub(ckpt['message_hub'])
    return ckpt
