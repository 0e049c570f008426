"""Strict loading of a pretrained backbone: every key or it fails.

mmengine's ``Pretrained`` init loads with ``strict=False`` (a wrong
``prefix`` leaves the backbone randomly initialised, with a log warning).
This one, in the ``tlalign_mm`` scope, is selected with ``_scope_``::

    backbone=dict(
        type='mmpretrain.VisionTransformer', ...,
        init_cfg=dict(
            type='Pretrained', _scope_='tlalign_mm',
            checkpoint='work_dirs/deit-small_4xb256-tlalign_in1k/'
                       'epoch_300.pth',
            prefix='backbone.', strict=True))

The name must be ``'Pretrained'``: ``BaseModule.init_weights`` runs that
type (only that one) after the children's ``init_weights``, and
mmpretrain's ViT/Swin keep their position embeddings only for it.
``strict=True`` is spelled out: mmengine's ``Pretrained`` refuses it, so a
config that loses its ``_scope_`` fails instead of loading non-strictly.
"""
from typing import Optional, Sequence

import torch.nn as nn
from mmengine.logging import print_log
from mmengine.model.weight_init import update_init_info

from tlalign_mm.checkpoint import CheckpointMismatchError, load
from tlalign_mm.checkpoint.strict import key_list, load_strictly, state_dict_of
from tlalign_mm.registry import WEIGHT_INITIALIZERS

HINT = ('Check the backbone config (arch, out_indices, final_norm, '
        'with_cls_token) against the pretraining config, and the prefix. '
        "Keys that are new by design go in init_cfg's allow_missing / "
        'allow_unexpected (fnmatch patterns).')


@WEIGHT_INITIALIZERS.register_module(name='Pretrained')
class StrictPretrainedInit:
    """Initialise a backbone from a checkpoint, strictly.

    Args:
        checkpoint (str): a local path or URL (:func:`tlalign_mm.checkpoint.
            load`).
        prefix (str): what to take from the checkpoint: ``'backbone.'``
            (default) for a classifier checkpoint or an exported backbone,
            ``''`` for a bare backbone state dict.
        strict (bool): must be ``True``; for non-strict loading use
            mmengine's ``Pretrained`` (without ``_scope_``).
        allow_missing (Sequence[str]): fnmatch patterns of backbone keys
            that may be absent from the checkpoint (left as initialised).
        allow_unexpected (Sequence[str]): fnmatch patterns of checkpoint
            keys the backbone may ignore.
        map_location (str): as :func:`torch.load`. Defaults to ``'cpu'``.
        hint (str, optional): said when ``checkpoint`` does not exist
            (configs name the variable to set and the command that makes it).
    """

    def __init__(self, checkpoint: str, prefix: str = 'backbone.',
                 strict: bool = True, allow_missing: Sequence[str] = (),
                 allow_unexpected: Sequence[str] = (), map_location='cpu',
                 hint: Optional[str] = None):
        if strict is not True:
            raise ValueError(f'This Pretrained is strict (strict={strict!r}): '
                             'list exceptions in allow_missing/unexpected, '
                             "or use mmengine's (no _scope_)")
        if str in (type(allow_missing), type(allow_unexpected)):
            raise TypeError('allow_missing / allow_unexpected must be a list '
                            'of patterns, not a string')
        self.checkpoint, self.prefix, self.hint = checkpoint, prefix, hint
        self.allow, self.map_location = (tuple(allow_missing), tuple(
            allow_unexpected)), map_location

    def __call__(self, module: nn.Module) -> None:
        source = f'{self.checkpoint!r} (prefix {self.prefix!r})'
        try:
            ckpt = load(self.checkpoint, self.map_location)
        except FileNotFoundError as error:
            if not self.hint:
                raise
            raise CheckpointMismatchError(
                f'Pretrained checkpoint {self.checkpoint!r} does not exist. '
                f'{self.hint}') from error
        state_dict = state_dict_of(ckpt, self.checkpoint, self.prefix)
        missing, unexpected, resized = load_strictly(
            module, state_dict, source, *self.allow, hint=HINT)
        notes = ''.join(f'; {what}: {key_list(keys)}' for what, keys in (
            ('new by design (allow_missing), left as initialised', missing),
            ('ignored (allow_unexpected)', unexpected),
            ("resized by the backbone's load hook",
             [f'{k} {a}->{b}' for k, a, b in resized])) if keys)
        print_log(f'Loaded {len(state_dict) - len(unexpected)} tensors into '
                  f'{type(module).__name__} from {source}, strictly{notes}',
                  logger='current')
        if hasattr(module, '_params_init_info'):
            update_init_info(module, f'strictly loaded from {source}')
