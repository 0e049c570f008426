"""Loading a checkpoint into a run fails loudly when it does not fit.

``Runner.load_checkpoint`` (behind ``load_from``, ``--resume`` and
``tools/test.py CONFIG CKPT``) loads with ``strict=False``: a checkpoint of
another architecture leaves the model randomly initialised with a warning
in the log, and ``tools/test.py`` exits 0 reporting a random model's
accuracy. This hook checks the checkpoint in ``after_load_checkpoint``,
before mmengine uses it. ``tools/train.py`` and ``tools/test.py`` add it;
``--cfg-options strict_load=False`` turns the key check off for people who
mean to load a part.
"""
import re
from collections import OrderedDict
from typing import Dict, List, Mapping, Tuple

import torch
import torch.nn as nn
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from .checkpoint_files import has_progress
from .registry import HOOKS

__all__ = ['CheckpointMismatchError', 'StrictLoadHook', 'check_resumable',
           'check_state_dict']

_SHOW = 20
_SIZE_MISMATCH = re.compile(
    r'size mismatch for (\S+): copying a param with shape (.+?) from '
    r'checkpoint, the shape in current model is (.+?)\.(?:\n|$)')


class CheckpointMismatchError(RuntimeError):
    """A checkpoint does not fit the run it is loaded into."""


def _list(keys: List[str]) -> str:
    shown = ', '.join(keys[:_SHOW])
    more = len(keys) - _SHOW
    return shown + (f', ... ({more} more)' if more > 0 else '')


def _shape(text: str) -> str:
    """``'torch.Size([5, 8])'`` -> ``'(5, 8)'``."""
    return str(tuple(int(n) for n in re.findall(r'\d+', text)))


def check_state_dict(model: nn.Module, checkpoint: Mapping,
                     source: str) -> None:
    """Load ``checkpoint``'s state dict into ``model``; raise unless every
    key fits (after the model's own load hooks, e.g. mmpretrain's ViT
    position-embedding resize).

    Keys are named as they are in the file (unexpected, mis-shaped) and in
    ``model.state_dict()`` (missing). ``module.`` prefixes are stripped, as
    ``Runner.load_checkpoint`` does.

    Raises:
        CheckpointMismatchError: missing, unexpected or mis-shaped keys.
    """
    state_dict = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state_dict, Mapping) or not any(
            torch.is_tensor(v) for v in state_dict.values()):
        raise CheckpointMismatchError(
            f'{source!r} holds no state dict (top-level keys: '
            f'{_list(sorted(map(str, checkpoint)))})')
    file_key: Dict[str, str] = {}
    revised = OrderedDict()
    for key, value in state_dict.items():
        new = re.sub(r'^module\.', '', key)
        file_key[new] = key
        revised[new] = value
    revised._metadata = getattr(state_dict, '_metadata', OrderedDict())
    mismatched: List[Tuple[str, str, str]] = []
    try:
        result = model.load_state_dict(revised, strict=False)
        missing, unexpected = result.missing_keys, result.unexpected_keys
    except RuntimeError as error:
        mismatched = [(file_key.get(k, k), _shape(a), _shape(b))
                      for k, a, b in _SIZE_MISMATCH.findall(str(error))]
        if not mismatched:
            raise
        own = model.state_dict()
        missing = sorted(set(own) - set(revised))
        unexpected = sorted(set(revised) - set(own))
    if not (missing or unexpected or mismatched):
        return
    lines = [f'Checkpoint {source!r} does not fit the model '
             f'({type(model).__name__}): loading it would leave these '
             'weights as initialised and every result meaningless.']
    if missing:
        lines.append(f'  missing in the checkpoint ({len(missing)}): '
                     f'{_list(sorted(missing))}')
    if unexpected:
        lines.append(
            f'  unexpected in the checkpoint ({len(unexpected)}): '
            f'{_list(sorted(file_key.get(k, k) for k in unexpected))}')
    if mismatched:
        lines.append(
            f'  shape differs ({len(mismatched)}): ' + _list(
                [f'{k} {a} in the checkpoint, {b} in the model'
                 for k, a, b in mismatched]))
    lines.append(
        'Check that the config is the one the checkpoint was trained with '
        '(architecture, number of classes). To load only the tensors that '
        'fit, on purpose, add --cfg-options strict_load=False.')
    raise CheckpointMismatchError('\n'.join(lines))


def check_resumable(checkpoint: Mapping, source: str) -> None:
    """Raise unless ``checkpoint`` is a Runner checkpoint a run can resume
    from (``meta`` with ``epoch``/``iter``, ``state_dict``,
    ``message_hub``)."""
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) \
        else None
    lacks = [k for k in ('meta', 'state_dict', 'message_hub')
             if not isinstance(checkpoint, Mapping) or k not in checkpoint]
    if meta is not None and not has_progress(meta):
        lacks.append("meta['epoch'] / meta['iter']")
    if lacks:
        raise CheckpointMismatchError(
            f'{source!r} cannot be resumed: it has no {", ".join(lacks)} '
            '(a bare state dict, an exported backbone or a published '
            'checkpoint holds weights only; resuming restores the iteration, '
            'optimizer and schedules too). To start a new run from its '
            f'weights: tools/train.py CONFIG --cfg-options load_from={source}'
            ' (without --resume).')


@HOOKS.register_module()
class StrictLoadHook(Hook):
    """Refuse a checkpoint that does not fit, before mmengine uses it.

    In ``after_load_checkpoint`` (called by ``Runner.load_checkpoint`` for
    ``load_from``, ``--resume`` and ``tools/test.py``):

    * when resuming, the checkpoint must be a Runner checkpoint
      (:func:`check_resumable`), not a bare state dict;
    * with ``strict=True``, every model key must be in the checkpoint and
      every checkpoint key in the model, with its shape
      (:func:`check_state_dict`).

    Args:
        strict (bool): check the keys. Defaults to True; ``tools/train.py``
            and ``tools/test.py`` take it from the config key
            ``strict_load`` (``--cfg-options strict_load=False``).
    """

    priority = 'VERY_HIGH'  # before other hooks (EMA) read the checkpoint

    def __init__(self, strict: bool = True):
        if not isinstance(strict, bool):
            raise TypeError(f'strict must be True or False, got {strict!r}')
        self.strict = strict

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        source = str(runner._load_from)
        if runner._resume:
            check_resumable(checkpoint, source)
        if self.strict:
            model = runner.model.module if is_model_wrapper(
                runner.model) else runner.model
            check_state_dict(model, checkpoint, source)
