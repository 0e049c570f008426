"""Strict loading of a pretrained backbone: every key or it fails.

mmengine's ``init_cfg=dict(type='Pretrained', ...)`` loads with
``strict=False``: a missing, unexpected or wrongly shaped tensor is a log
warning, and a wrong ``prefix`` or key layout leaves the backbone randomly
initialised while training goes on. This module registers a strict
``Pretrained`` in its own registry scope; a config selects it with
``_scope_``::

    backbone=dict(
        type='mmpretrain.VisionTransformer', ...,
        init_cfg=dict(
            type='Pretrained', _scope_='tlalign_mm.downstream',
            checkpoint='work_dirs/deit-small_4xb256_in1k_tlalign/'
                       'epoch_300.pth',
            prefix='backbone.', strict=True))

Why the name ``'Pretrained'`` and not a new one: mmengine's
``BaseModule.init_weights`` runs an init_cfg whose type is ``'Pretrained'``
*after* the children's own ``init_weights``, and mmpretrain's
``VisionTransformer``/``SwinTransformer`` skip re-initialising their
position embeddings only when ``init_cfg['type'] == 'Pretrained'``. Any
other type name runs first and is then overwritten (the FFN and pos_embed
re-initialisation would silently undo the load). ``_scope_`` (resolved by
mmengine's ``build_from_cfg`` from any default scope: mmpretrain, mmseg or
mmdet) selects this implementation while keeping the name. ``strict=True``
is spelled out in configs on purpose: mmengine's own ``Pretrained`` does not
accept it, so a config that loses its ``_scope_`` fails with a TypeError
instead of silently loading non-strictly.

What is checked (after the backbone's own load hooks ran, e.g. mmpretrain's
ViT position-embedding resize):

* the checkpoint has tensors under ``prefix`` (else: the prefixes it has);
* no backbone key is missing, no checkpoint key is unexpected, no shape
  differs. Intentional exceptions are listed per config in
  ``allow_missing`` / ``allow_unexpected`` (fnmatch patterns on the
  backbone's keys), e.g. ``('norm0.*', 'norm1.*', 'norm2.*')`` for the
  output norms a Swin gains when it outputs all four stages (an ImageNet
  Swin only has ``norm3``). They are logged by name.
"""
import fnmatch
import logging
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmengine.logging import print_log
from mmengine.model.weight_init import update_init_info
from mmengine.registry import WEIGHT_INITIALIZERS as MMENGINE_INITIALIZERS
from mmengine.registry import Registry

from tlalign_mm.checkpoint_safety import load_checkpoint_weights_only

__all__ = [
    'SCOPE', 'WEIGHT_INITIALIZERS', 'BackboneLoadError',
    'StrictPretrainedInit', 'load_backbone_state_dict', 'load_strict',
    'strict_pretrained_cfg'
]

#: registry scope of the strict ``Pretrained``; ``import_module(SCOPE +
#: '.registry')`` (what mmengine does when it switches to a scope) works.
SCOPE = 'tlalign_mm.downstream'

WEIGHT_INITIALIZERS = Registry(
    'weight initializer', parent=MMENGINE_INITIALIZERS, scope=SCOPE)

_SHOW = 20  # keys listed per category in messages


class BackboneLoadError(RuntimeError):
    """A pretrained backbone did not load completely and exactly."""


def strict_pretrained_cfg(checkpoint: str,
                          prefix: str = 'backbone.',
                          allow_missing: Sequence[str] = (),
                          allow_unexpected: Sequence[str] = ()) -> dict:
    """The ``init_cfg`` dict that selects :class:`StrictPretrainedInit`."""
    cfg = dict(type='Pretrained', _scope_=SCOPE, checkpoint=checkpoint,
               prefix=prefix, strict=True)
    if allow_missing:
        cfg['allow_missing'] = list(allow_missing)
    if allow_unexpected:
        cfg['allow_unexpected'] = list(allow_unexpected)
    return cfg


def _list(keys: Iterable[str]) -> str:
    keys = sorted(keys)
    shown = ', '.join(keys[:_SHOW])
    more = len(keys) - _SHOW
    return shown + (f', ... ({more} more)' if more > 0 else '')


def _top_prefixes(keys: Iterable[str]) -> List[str]:
    return sorted({k.split('.', 1)[0] + '.' if '.' in k else k for k in keys})


def load_backbone_state_dict(checkpoint: str,
                             prefix: Optional[str] = 'backbone.',
                             map_location='cpu') -> Dict[str, torch.Tensor]:
    """The tensors under ``prefix`` of a checkpoint, prefix removed.

    The file is read with
    :func:`tlalign_mm.checkpoint_safety.load_checkpoint_weights_only`
    (every mmengine scheme, ``weights_only=True`` whatever the
    environment says). It may be a Runner checkpoint (``{'state_dict':
    ..., 'meta': ..., 'optimizer': ...}``), an exported backbone
    (``tools/export_backbone.py``) or a bare state dict.

    Raises:
        BackboneLoadError: nothing under ``prefix``, or a non-tensor value.
    """
    ckpt = load_checkpoint_weights_only(checkpoint, map_location)
    if not isinstance(ckpt, dict):
        raise BackboneLoadError(
            f'{checkpoint!r} holds a {type(ckpt).__name__}, not a state dict')
    state_dict = ckpt.get('state_dict', ckpt)
    prefix = prefix or ''
    if prefix and not prefix.endswith('.'):
        prefix += '.'
    picked = {
        k[len(prefix):]: v
        for k, v in state_dict.items() if k.startswith(prefix)
    }
    if not picked:
        raise BackboneLoadError(
            f'No key of {checkpoint!r} starts with prefix {prefix!r}. Its '
            f'keys start with: {_list(_top_prefixes(state_dict))}. A '
            "classifier checkpoint (TL-Align's included) needs "
            "prefix='backbone.'; a bare backbone state dict prefix=''.")
    bad = sorted(k for k, v in picked.items() if not torch.is_tensor(v))
    if bad:
        raise BackboneLoadError(
            f'{checkpoint!r}: non-tensor values under {prefix!r}: '
            f'{_list(bad)}')
    return picked


def _matches(key: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def load_strict(module: nn.Module,
                state_dict: Dict[str, torch.Tensor],
                allow_missing: Sequence[str] = (),
                allow_unexpected: Sequence[str] = (),
                source: str = 'the checkpoint') -> Tuple[list, list, list]:
    """Load ``state_dict`` into ``module``; raise unless it fits exactly.

    The module's own ``load_state_dict`` pre-hooks run as usual (they may
    resize a position embedding or a relative position bias table to the
    module's shape); shapes are compared after them.

    Returns:
        tuple: the allowed missing keys, the allowed unexpected keys and
        ``(key, checkpoint shape, loaded shape)`` of tensors a load hook
        resized.

    Raises:
        BackboneLoadError: a missing or unexpected key not allowed by the
            patterns, or a shape mismatch.
    """
    own = module.state_dict()
    try:
        result = module.load_state_dict(state_dict, strict=False)
    except RuntimeError as error:  # size mismatch: torch raises regardless
        raise BackboneLoadError(
            f'{source} does not fit {type(module).__name__}: {error}') \
            from None
    missing = [k for k in result.missing_keys if k in own]
    unexpected = list(result.unexpected_keys)
    bad_missing = [k for k in missing if not _matches(k, allow_missing)]
    bad_unexpected = [
        k for k in unexpected if not _matches(k, allow_unexpected)
    ]
    if bad_missing or bad_unexpected:
        lines = [
            f'{source} does not load exactly into {type(module).__name__} '
            f'({len(state_dict)} checkpoint tensors, {len(own)} backbone '
            'tensors).'
        ]
        if bad_missing:
            lines.append(f'Missing in the checkpoint ({len(bad_missing)}): '
                         f'{_list(bad_missing)}')
        if bad_unexpected:
            lines.append('Unexpected in the checkpoint '
                         f'({len(bad_unexpected)}): {_list(bad_unexpected)}')
        lines.append(
            'Check the backbone config (arch, out_indices, final_norm, '
            'with_cls_token) against the pretraining config, and the '
            "prefix. Keys that are new by design go in init_cfg's "
            'allow_missing / allow_unexpected (fnmatch patterns).')
        raise BackboneLoadError('\n'.join(lines))
    resized = [(k, tuple(v.shape), tuple(own[k].shape))
               for k, v in state_dict.items()
               if k in own and tuple(v.shape) != tuple(own[k].shape)]
    return missing, unexpected, resized


@WEIGHT_INITIALIZERS.register_module(name='Pretrained')
class StrictPretrainedInit:
    """Initialise a backbone from a checkpoint, strictly.

    Use it as ``init_cfg=dict(type='Pretrained', _scope_=
    'tlalign_mm.downstream', checkpoint=..., prefix='backbone.',
    strict=True)`` (or :func:`strict_pretrained_cfg`), on the backbone.

    Args:
        checkpoint (str): a local path or URL (mmengine's loaders).
        prefix (str): what to take from the checkpoint. ``'backbone.'``
            (default) for a classifier checkpoint or an exported backbone;
            ``''`` for a bare backbone state dict.
        strict (bool): must be ``True``; for non-strict loading use
            mmengine's ``Pretrained`` (without ``_scope_``).
        allow_missing (Sequence[str]): fnmatch patterns of backbone keys
            that may be absent from the checkpoint (new by design; they
            keep their initialisation).
        allow_unexpected (Sequence[str]): fnmatch patterns of checkpoint
            keys the backbone may ignore.
        map_location (str): as :func:`torch.load`. Defaults to ``'cpu'``.
        hint (str, optional): said when ``checkpoint`` is a local path that
            does not exist (configs name the variable that sets it and the
            command that makes the file).
    """

    def __init__(self,
                 checkpoint: str,
                 prefix: str = 'backbone.',
                 strict: bool = True,
                 allow_missing: Sequence[str] = (),
                 allow_unexpected: Sequence[str] = (),
                 map_location='cpu',
                 hint: Optional[str] = None):
        if strict is not True:
            raise ValueError(
                f'The {SCOPE} Pretrained initializer is strict (got '
                f'strict={strict!r}); list intentional exceptions in '
                "allow_missing/allow_unexpected, or use mmengine's "
                'Pretrained (no _scope_) for a non-strict load.')
        for name, value in (('allow_missing', allow_missing),
                            ('allow_unexpected', allow_unexpected)):
            if isinstance(value, str):
                raise TypeError(f'{name} must be a list of patterns, got the '
                                f'string {value!r}')
        self.checkpoint = checkpoint
        self.prefix = prefix
        self.allow_missing = tuple(allow_missing)
        self.allow_unexpected = tuple(allow_unexpected)
        self.map_location = map_location
        self.hint = hint

    def __call__(self, module: nn.Module) -> None:
        source = f'{self.checkpoint!r} (prefix {self.prefix!r})'
        try:
            state_dict = load_backbone_state_dict(self.checkpoint,
                                                  self.prefix,
                                                  self.map_location)
        except FileNotFoundError as error:
            # The loader decides what is a missing file (it expands ~, and
            # leaves URLs to their backends); the config's hint says how to
            # make it.
            if not self.hint:
                raise
            raise BackboneLoadError(
                f'Pretrained checkpoint {self.checkpoint!r} does not exist. '
                f'{self.hint}') from error
        missing, unexpected, resized = load_strict(
            module, state_dict, self.allow_missing, self.allow_unexpected,
            source)
        message = (f'Loaded {len(state_dict) - len(unexpected)} tensors into '
                   f'{type(module).__name__} from {source}, strictly')
        if missing:
            message += ('; new by design (allow_missing), left as '
                        f'initialised: {_list(missing)}')
        if unexpected:
            message += f'; ignored (allow_unexpected): {_list(unexpected)}'
        if resized:
            message += '; resized by the backbone\'s load hook: ' + ', '.join(
                f'{k} {a}->{b}' for k, a, b in resized)
        print_log(message, logger='current', level=logging.INFO)
        if hasattr(module, '_params_init_info'):
            update_init_info(module, init_info=self._get_init_info())

    def _get_init_info(self) -> str:
        return (f'{type(self).__name__}: strictly loaded from '
                f'{self.checkpoint} (prefix {self.prefix!r})')
