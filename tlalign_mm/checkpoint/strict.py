"""One strict loader: every key fits, or one error listing those that do not.

Used by ``tools/test.py``, ``load_from`` and ``--resume`` (through
:class:`~tlalign_mm.checkpoint.hooks.CheckpointSafetyHook`) and by the
downstream ``init_cfg`` (:class:`~tlalign_mm.downstream.StrictPretrainedInit`).
"""
import re
from collections import OrderedDict
from fnmatch import fnmatchcase
from typing import Dict, Mapping, Sequence, Tuple

import torch
import torch.nn as nn

from .load import CheckpointError

_SIZE_MISMATCH = re.compile(
    r'size mismatch for (\S+): copying a param with shape (.+?) from '
    r'checkpoint, the shape in current model is (.+?)\.(?:\n|$)')


class CheckpointMismatchError(CheckpointError):
    """A checkpoint does not fit the model it is loaded into."""


def key_list(keys, show: int = 20) -> str:
    keys = sorted(keys)
    more = f', ... ({len(keys) - show} more)' if len(keys) > show else ''
    return ', '.join(keys[:show]) + more


def state_dict_of(checkpoint: Mapping, source: str, prefix: str = ''
                  ) -> 'OrderedDict[str, torch.Tensor]':
    """The tensors of ``checkpoint`` (its ``state_dict`` if it has one)
    under ``prefix``, prefix removed, ``module.`` stripped as
    ``Runner.load_checkpoint`` does (:func:`~.load.load` has dropped what
    is not a tensor)."""
    state_dict = checkpoint.get('state_dict', checkpoint)
    if not isinstance(state_dict, Mapping) or not any(
            torch.is_tensor(v) for v in state_dict.values()):
        raise CheckpointMismatchError(
            f'{source!r} holds no state dict (top-level keys: '
            f'{key_list(map(str, checkpoint))})')
    keys = {re.sub(r'^module\.', '', k): k for k in state_dict}
    picked = OrderedDict((k[len(prefix):], state_dict[old])
                         for k, old in keys.items() if k.startswith(prefix))
    if not picked:
        raise CheckpointMismatchError(
            f'No key of {source!r} starts with prefix {prefix!r}; its keys '
            f'start with: {key_list({k.split(".")[0] + "." for k in keys})}'
            ". A classifier checkpoint needs prefix='backbone.', a bare "
            "backbone state dict prefix=''.")
    picked._metadata = getattr(state_dict, '_metadata', OrderedDict())
    return picked


def _shape(text: str) -> Tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r'\d+', text))


def load_strictly(module: nn.Module, state_dict: Dict[str, torch.Tensor],
                  source: str, allow_missing: Sequence[str] = (),
                  allow_unexpected: Sequence[str] = (),
                  hint: str = '', assign: bool = False
                  ) -> Tuple[list, list, list]:
    """Load ``state_dict`` into ``module``; raise unless every key fits
    (after the module's own load hooks, e.g. a position-embedding resize).

    Args:
        allow_missing / allow_unexpected: fnmatch patterns of keys that may
            be absent from the checkpoint / ignored by the module.
        hint (str): the error's last line (what to check, how to opt out).
        assign (bool): ``load_state_dict``'s: the module takes the tensors
            themselves (one built on the meta device).

    Returns:
        tuple: the allowed missing keys, the allowed unexpected keys and
        ``(key, file shape, model shape)`` of tensors a load hook resized.

    Raises:
        CheckpointMismatchError: naming every missing, unexpected and
            mis-shaped key.
    """
    own = module.state_dict()
    mismatched = []
    try:
        result = module.load_state_dict(state_dict, strict=False,
                                        assign=assign)
        # A key the module's own load hook drops although the file holds
        # the very tensor the module keeps is not missing: loading it would
        # change nothing. (SwinTransformerV2 drops relative_position_index
        # and relative_coords_table, rebuilt from its window size; from
        # another window size they differ and stay missing.)
        missing = [k for k in result.missing_keys if not (torch.is_tensor(
            t := state_dict.get(k)) and torch.equal(t.to(own[k]), own[k]))]
        unexpected = result.unexpected_keys
    except RuntimeError as error:
        mismatched = [f'{k} {_shape(a)} in the checkpoint, {_shape(b)} in '
                      'the model'
                      for k, a, b in _SIZE_MISMATCH.findall(str(error))]
        if not mismatched:
            raise
        missing = sorted(set(own) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(own))
    bad_missing = [k for k in missing
                   if not any(fnmatchcase(k, p) for p in allow_missing)]
    bad_unexpected = [k for k in unexpected
                      if not any(fnmatchcase(k, p) for p in allow_unexpected)]
    if bad_missing or bad_unexpected or mismatched:
        parts = (('missing in the checkpoint', bad_missing),
                 ('unexpected in the checkpoint', bad_unexpected),
                 ('shape differs', mismatched))
        raise CheckpointMismatchError('\n'.join(
            [f'Checkpoint {source} does not fit {type(module).__name__}: '
             'loading it would leave these weights as initialised.'] +
            [f'  {what} ({len(keys)}): {key_list(keys)}'
             for what, keys in parts if keys] + [hint] * bool(hint)))
    resized = [(k, tuple(v.shape), tuple(own[k].shape))
               for k, v in state_dict.items()
               if k in own and v.shape != own[k].shape]
    return ([k for k in missing if k not in bad_missing],
            [k for k in unexpected if k not in bad_unexpected], resized)
