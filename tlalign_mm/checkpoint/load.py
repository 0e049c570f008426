"""``load(source)``: read a checkpoint from any scheme, weights only.

Nothing in a file is executed or trusted:

* the zip directory is checked before ``torch.load`` inflates anything
  (``torch.save`` writes stored records only, so a deflated record, or
  records larger than the file, are refused);
* ``torch.load(weights_only=True)`` is called with the argument spelled
  out, so ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it off, and with
  torch's stock allow-list: the checkpoints our runs write hold tensors and
  plain Python only (:mod:`.plain`);
* a foreign Runner checkpoint's numpy and ``HistoryBuffer`` objects are
  unpickled as inert stand-ins, which are then dropped (message-hub logs,
  numpy metadata): nothing of numpy or mmengine is built from the file;
* tensors whose header claims more than their storage holds are refused;
* ``meta['config']``, a config string mmengine's ``Runner.resume`` would
  execute (``Config.fromstring``), is parsed without executing it and
  replaced by the one value mmengine reads from it (``gpu_ids``);
* ``meta.epoch`` / ``meta.iter`` must be plausible non-negative integers.

Every refusal is a :class:`CheckpointError` naming the file.
"""
import ast
import os
import os.path as osp
import re
import zipfile
from typing import Any, List, Optional
from urllib.parse import urlparse

import torch
from mmengine.logging import print_log

from .plain import restore_message_hub

#: the largest meta epoch / iter accepted (ImageNet, 300 epochs at batch
#: 1,024, is 375k iterations)
MAX_PROGRESS = 10**9
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
    """Inert stand-in for every foreign global: it takes any arguments and
    state and keeps none of them."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


_STAND_INS = [(_Dropped, name) for name in FOREIGN_GLOBALS]


def _clean(value: Any, path: str, source: str, dropped: List[str]) -> Any:
    """``value`` without the entries that hold a stand-in (their paths go
    to ``dropped``); a tensor whose header claims more elements than its
    storage holds (a zero stride can make 8 bytes look like a terabyte) is
    refused."""
    if isinstance(value, _Dropped):
        dropped.append(path)
        return _Dropped
    if torch.is_tensor(value):
        if value.numel() * value.element_size() > \
                value.untyped_storage().nbytes():
            raise _error(source, f'tensor {path} claims {value.numel()} '
                         'elements, more than its storage holds (a crafted '
                         'header)')
    elif isinstance(value, dict):
        items = [(k, _clean(v, f'{path}[{k!r}]', source, dropped))
                 for k, v in value.items()]
        value.clear()
        value.update((k, v) for k, v in items
                     if v is not _Dropped and not isinstance(k, _Dropped))
    elif isinstance(value, (list, tuple)):
        items = [_clean(v, f'{path}[{i}]', source, dropped)
                 for i, v in enumerate(value)]
        if _Dropped in items:
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
    with open(path, 'rb') as f:
        head = f.read(4)
    if head != b'PK\x03\x04':
        raise _error(source, 'it is empty (an interrupted save leaves such '
                     'files; `tools/train.py CONFIG --resume` picks the '
                     'newest intact checkpoint)' if not head else 'it is not '
                     f'the zip archive torch.save writes (it starts with '
                     f'{head!r}); re-save it with torch.save')
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise _error(source, f'it is truncated or corrupt ({error})') \
            from None
    names = ['/' + r.filename for r in records]
    if any(n.endswith('/constants.pkl') for n in names):
        raise _error(source, 'it is a TorchScript archive (torch.jit.save); '
                     'load it with torch.jit.load')
    if not any(n.endswith('/data.pkl') for n in names):
        raise _error(source, 'it is a zip archive without data.pkl, not a '
                     'torch.save checkpoint')
    for r in records:
        if r.compress_type != zipfile.ZIP_STORED or \
                r.file_size != r.compress_size:
            raise _error(
                source, f'record {r.filename!r} is compressed '
                f'({r.compress_size} bytes that would inflate to '
                f'{r.file_size}); torch.save never compresses, so it was '
                'refused before inflating it')
    if sum(r.file_size for r in records) > osp.getsize(path):
        raise _error(source, 'its records claim more bytes than it holds')


def _torch_load(path: str, source: str, map_location, mmap: bool) -> Any:
    try:
        with torch.serialization.safe_globals(_STAND_INS):
            return torch.load(path, map_location=map_location,
                              weights_only=True, mmap=mmap)
    except Exception as error:  # noqa: BLE001  all named below
        unsafe = re.search(r'GLOBAL ([\w.]*\w)', str(error))
        if unsafe:
            raise _error(
                source, 'it pickles objects outside the weights-only '
                f'allow-list ({unsafe.group(1)}); nothing from it was '
                'executed. Re-save the tensors you trust with '
                "torch.save({'state_dict': model.state_dict()}, path)"
            ) from None
        lines = [s.strip() for s in str(error).splitlines() if s.strip()]
        reason = next((s for s in lines if 'Unsupported' in s),
                      lines[-1] if lines else type(error).__name__)
        raise _error(source, f'it is corrupt or crafted ({reason})') from None


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


def _check_meta(meta: Any, source: str) -> None:
    if not isinstance(meta, dict):
        raise _error(source, f'its meta is a {type(meta).__name__}, not a '
                     'dict')
    for key in ('epoch', 'iter'):
        value = meta.get(key, 0)
        if not (type(value) is int and 0 <= value <= MAX_PROGRESS):
            raise _error(source, f'meta[{key!r}] = {value!r} is not an '
                         f'integer in [0, {MAX_PROGRESS}]')
    if 'config' in meta:
        # Runner.resume executes it to read gpu_ids: keep just that value
        text = meta.pop('config')
        try:
            gpu_ids = parse_config(text, 'gpu_ids').get('gpu_ids')
        except (ValueError, TypeError):
            gpu_ids = None
        if isinstance(gpu_ids, (list, tuple)) and \
                all(type(i) is int for i in gpu_ids):
            meta['config'] = f'gpu_ids = {list(gpu_ids)!r}\n'


def _local_path(source: str) -> str:
    """The file of a checkpoint name: model-zoo names resolved with
    mmengine's tables, URLs downloaded into torch hub's cache
    (``<hub>/checkpoints``, as :func:`torch.hub.load_state_dict_from_url`)."""
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
        raise _error(source, 'only local paths, http(s):// and the '
                     'torchvision:// / open-mmlab:// model zoos are read; '
                     'download it and pass its local path')
    return osp.expanduser(source)


def load(source: str, map_location: Any = 'cpu', mmap: bool = False) -> dict:
    """Load the checkpoint ``source`` (a local path, ``http(s)://``,
    ``torchvision://NAME``, ``open-mmlab://NAME``), weights only;
    ``mmap=True`` maps the tensors instead of reading them.

    Returns:
        dict: the checkpoint (a Runner checkpoint, a state dict...).

    Raises:
        FileNotFoundError: a local path that does not exist.
        CheckpointError: anything else that is wrong with the file.
    """
    source = str(source)
    path = _local_path(source)
    _check_archive(path, source)
    ckpt = _torch_load(path, source, map_location, mmap)
    if not isinstance(ckpt, dict):
        raise _error(source, f'it holds a {type(ckpt).__name__}, not a '
                     'checkpoint dict or state dict')
    dropped: List[str] = []
    try:
        _clean(ckpt, 'checkpoint', source, dropped)
    except RecursionError:
        raise _error(source, 'it is nested too deeply') from None
    if dropped:
        print_log(f'{source} was written with numpy / HistoryBuffer objects;'
                  f' {len(dropped)} of them were dropped, never built: '
                  f'{", ".join(dropped[:8])}{" ..." * (len(dropped) > 8)}',
                  logger='current', level=30)
    if ckpt.get('meta') is not None:
        _check_meta(ckpt['meta'], source)
    if isinstance(ckpt.get('message_hub'), dict):
        restore_message_hub(ckpt['message_hub'])
    return ckpt
