"""Export the backbone of a classifier checkpoint as a tensors-only file.

A TL-Align (or CutMix) ImageNet checkpoint written by mmengine's Runner is
``{'meta', 'state_dict', 'message_hub', 'optimizer', 'param_schedulers'}``.
The export keeps only the ``backbone.*`` tensors and plain-typed ``meta``
(the pretraining backbone config is parsed from ``meta['cfg']``, never
executed), so it loads with ``torch.load(path, weights_only=True)`` in any
environment, and is a fraction of the size.

The key layout is mmpretrain's for every target: the downstream configs of
this package build mmpretrain's backbones inside mmseg and mmdet
(``type='mmpretrain.VisionTransformer'`` / ``'mmpretrain.SwinTransformer'``
through the cross-scope registry), so no key or tensor conversion is needed
and the backbone is the pretrained module itself. Keys keep their
``backbone.`` prefix: the same ``init_cfg`` (``prefix='backbone.'``) reads
the Runner checkpoint and the export alike.
"""
import hashlib
import json
import logging
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config
from mmengine.logging import MMLogger

from tlalign_mm.checkpoint import (
    CheckpointMismatchError,
    load,
    parse_config,
    state_dict_of,
)
from tlalign_mm.models.tlalign_backbone import plain_backbone_cfg

from .strict_pretrained import SCOPE

__all__ = [
    'TARGETS', 'check_export', 'export_backbone',
    'unsafe_globals_without_allow_list'
]

TARGETS = ('mmpretrain', 'mmseg', 'mmdet')


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def unsafe_globals_without_allow_list(path: str) -> list:
    """The globals ``torch.load(path, weights_only=True)`` would refuse
    in a process without any allow-list (tlalign_mm's included)."""
    serialization = torch.serialization
    saved = serialization.get_safe_globals()
    serialization.clear_safe_globals()
    try:
        return sorted(serialization.get_unsafe_globals_in_checkpoint(path))
    finally:
        serialization.add_safe_globals(saved)


def _plain(value):
    """JSON round trip: tuples become lists; anything else is dropped."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


def _pretrain_backbone_cfg(src_meta: dict) -> Optional[dict]:
    """The (unwrapped) backbone config of the training run, if recorded
    (``meta['cfg']`` is parsed, never executed)."""
    text = src_meta.get('cfg') if isinstance(src_meta, dict) else None
    if not isinstance(text, str):
        return None
    try:
        backbone = parse_config(text)['model']['backbone']
    except (ValueError, KeyError, TypeError):  # not a plain config: skip
        return None
    return _plain(plain_backbone_cfg(backbone))


def export_backbone(src: str,
                    dst: str,
                    to: str = 'mmpretrain',
                    prefix: str = 'backbone.') -> dict:
    """Write the ``prefix`` tensors of ``src`` to ``dst``.

    Args:
        src (str): a Runner checkpoint of a classifier (TL-Align's or any
            mmpretrain ``ImageClassifier``'s).
        dst (str): output path.
        to (str): the library that will fine-tune it (``'mmpretrain'``,
            ``'mmseg'``, ``'mmdet'``); recorded in ``meta``. The layout is
            mmpretrain's for all three (see the module docstring).
        prefix (str): the backbone's prefix in ``src``.

    Returns:
        dict: the ``meta`` written (plain types only).

    Raises:
        CheckpointMismatchError: no tensor under ``prefix``, or a
            non-tensor.
    """
    if to not in TARGETS:
        raise ValueError(f'--to must be one of {TARGETS}, got {to!r}')
    ckpt = load(src)
    picked = state_dict_of(ckpt, repr(src), prefix)
    # clone: a view would drag its whole storage into the file
    tensors = {
        prefix + k: picked[k].detach().to('cpu').clone().contiguous()
        for k in sorted(picked)
    }
    src_meta = ckpt.get('meta', {}) if isinstance(ckpt, dict) else {}
    src_meta = src_meta if isinstance(src_meta, dict) else {}
    from tlalign_mm import __version__
    meta = dict(
        exported_by=f'tlalign_mm {__version__} tools/export_backbone.py',
        to=to,
        layout='mmpretrain',
        prefix=prefix,
        loader=dict(type='Pretrained', _scope_=SCOPE, prefix=prefix,
                    strict=True),
        source=osp.abspath(src),
        source_sha256=_sha256(src),
        epoch=_plain(src_meta.get('epoch')),
        iter=_plain(src_meta.get('iter')),
        num_tensors=len(tensors),
        num_params=int(sum(t.numel() for t in tensors.values())),
        backbone=_pretrain_backbone_cfg(src_meta),
    )
    torch.save({'meta': meta, 'state_dict': tensors}, dst)
    unsafe = unsafe_globals_without_allow_list(dst)
    if unsafe:  # cannot happen with tensors and plain types; make sure
        raise RuntimeError(f'{dst} would need allow-listed globals: {unsafe}')
    return meta


def check_export(path: str, config: str) -> str:
    """Build ``config``'s backbone and initialise it from ``path``.

    The backbone's ``init_cfg`` must be this package's strict
    ``Pretrained``; its ``checkpoint`` is replaced by ``path``. Raises
    :class:`CheckpointMismatchError` if a key does not load; returns the
    backbone's type name.
    """
    from mmengine.registry import MODELS, init_default_scope
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    backbone = cfg.model.backbone
    init = backbone.get('init_cfg')
    if not (isinstance(init, dict) and init.get('type') == 'Pretrained'
            and init.get('_scope_') == SCOPE):
        raise CheckpointMismatchError(
            f'{config}: the backbone init_cfg is not the strict loader '
            f"(dict(type='Pretrained', _scope_={SCOPE!r}, ...)); got "
            f'{init!r}')
    init.checkpoint = path
    module = MODELS.build(backbone)
    # mmengine logs every parameter's init info at INFO without a log file
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        module.init_weights()
    finally:
        logger.setLevel(level)
    return type(module).__name__
