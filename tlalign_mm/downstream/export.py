"""Export a classifier checkpoint as a tensors-only file
(``tools/export_backbone.py``).

:func:`export_backbone`: ``{'meta', 'state_dict'}`` with the ``backbone.*``
tensors (prefix kept: the same ``init_cfg`` reads the Runner checkpoint and
the export) and plain ``meta`` (the pretraining backbone config from
``meta['cfg']``, parsed, never run). The layout is mmpretrain's for every
target: the downstream configs build mmpretrain's backbones inside mmseg
and mmdet.

:func:`export_timm`: a ``PooledTIMMBackbone`` classifier as a timm state
dict (``backbone.timm_model.`` stripped, the head's ``Linear`` as timm's
``head``, and for distilled DeiT also ``head_dist``: timm averages
``head(cls)`` and ``head_dist(dist)``, which with both the trained head is
what the mmpretrain head computed), checked to load strictly into
``timm.create_model(name, **kwargs)`` built on the meta device (nothing
sized by the file's recorded config is allocated).

Both write OUT atomically (:func:`~tlalign_mm.checkpoint.atomic_write`: a
symlink at OUT is replaced, never written through; OUT a directory is
refused).
"""
import hashlib
import json
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config

from tlalign_mm.checkpoint import (
    CheckpointMismatchError,
    atomic_write,
    load,
    load_strictly,
    state_dict_of,
)
from tlalign_mm.models.tlalign_backbone import plain_backbone_cfg
from tlalign_mm.registry import SCOPE, WEIGHT_INITIALIZERS

TARGETS = ('mmpretrain', 'mmseg', 'mmdet')
TIMM_PREFIX = 'backbone.timm_model.'
#: ``TIMMBackbone`` arguments that are not timm model arguments.
_NOT_TIMM_ARGS = ('type', 'init_cfg', 'pretrained', 'checkpoint_path',
                  'features_only', 'in_channels', 'model_name')


def _plain(value):
    """JSON round trip: tuples become lists, anything else None."""
    return json.loads(json.dumps(value, default=lambda _: None))


def _recorded_model(ckpt: dict) -> Optional[dict]:
    """The training run's model config (``meta['cfg']``, parsed by
    :func:`~tlalign_mm.checkpoint.load`), or ``None``."""
    return ckpt.get('meta', {}).get('cfg', {}).get('model')


def export_backbone(src: str, dst: str, to: str = 'mmpretrain',
                    prefix: str = 'backbone.', check: Optional[str] = None
                    ) -> dict:
    """Write the ``prefix`` tensors of the classifier checkpoint ``src`` to
    ``dst`` for the library ``to``; with ``check`` (a downstream config),
    only if its backbone loads them strictly. Returns the ``meta`` written.

    Raises:
        CheckpointMismatchError: no tensor under ``prefix``, or
            (``check``) a key the backbone does not load.
    """
    if to not in TARGETS:
        raise ValueError(f'--to must be one of {TARGETS}, got {to!r}')
    ckpt = load(src)
    picked = state_dict_of(ckpt, src, prefix)
    # clone: a view would drag its whole storage into the file
    tensors = {prefix + k: v.detach().cpu().clone().contiguous()
               for k, v in sorted(picked.items())}
    meta, model = ckpt.get('meta', {}), _recorded_model(ckpt)
    with open(src, 'rb') as f:
        sha256 = hashlib.file_digest(f, 'sha256').hexdigest()
    from tlalign_mm import __version__
    meta = dict(
        exported_by=f'tlalign_mm {__version__} tools/export_backbone.py',
        to=to, layout='mmpretrain', prefix=prefix,
        loader=dict(type='Pretrained', _scope_=SCOPE, prefix=prefix,
                    strict=True),
        source=osp.abspath(src), source_sha256=sha256,
        **{k: meta[k] for k in ('epoch', 'iter') if k in meta},
        num_tensors=len(tensors),
        num_params=sum(t.numel() for t in tensors.values()),
        backbone=_plain(plain_backbone_cfg(model['backbone']))
        if isinstance(model, dict) and 'backbone' in model else None)
    atomic_write(dst, lambda f: torch.save(
        {'meta': meta, 'state_dict': tensors}, f),
        (lambda path: check_export(path, check)) if check else None)
    return meta


def check_export(path: str, config: str) -> str:
    """Build ``config``'s backbone and initialise it from ``path`` with the
    strict ``Pretrained`` its ``init_cfg`` must be; return its type name.

    Raises:
        CheckpointMismatchError: not the strict loader, or a key that fails.
    """
    from mmengine.registry import MODELS, init_default_scope
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    init = cfg.model.backbone.get('init_cfg')
    if not (isinstance(init, dict) and init.get('type') == 'Pretrained'
            and init.get('_scope_') == SCOPE):
        raise CheckpointMismatchError(f"{config}: the backbone init_cfg is "
                                      f'not the strict loader, {init!r}')
    init.checkpoint = path
    module = MODELS.build(cfg.model.backbone)
    # the initializer alone: init_weights would also re-initialise every
    # other weight and log each parameter's init info
    WEIGHT_INITIALIZERS.build(init)(module)
    return type(module).__name__


def export_timm(src: str, dst: str, config: Optional[str] = None) -> dict:
    """Write the timm state dict of ``src`` (a ``PooledTIMMBackbone``
    classifier checkpoint) to ``dst``; ``config``: the training config
    (default: the one the checkpoint records). Returns ``model_name``,
    ``kwargs`` (``timm.create_model``'s), ``num_tensors`` and ``head`` (the
    head prefix exported, or ``None``).

    Raises:
        CheckpointMismatchError: no timm tensors, a head timm cannot hold, or
        a state dict that ``timm.create_model`` does not load strictly.
    """
    import timm
    ckpt = load(src)
    model = Config.fromfile(config).model.to_dict() if config else \
        _recorded_model(ckpt)
    if model is None:
        raise CheckpointMismatchError(
            f'{src!r}: its meta.cfg is missing or not a plain config, so the '
            'timm model name is unknown: pass the training config (--config)')
    backbone = model.get('backbone') if isinstance(model, dict) else None
    backbone = plain_backbone_cfg(dict(backbone)) if isinstance(
        backbone, dict) else {}
    if backbone.get('type') != 'PooledTIMMBackbone' or not isinstance(
            backbone.get('model_name'), str):
        raise CheckpointMismatchError(
            f'--format timm exports PooledTIMMBackbone models with a '
            f"model_name; the backbone of {config or src!r} is "
            f"{backbone.get('type')!r} with model_name "
            f"{backbone.get('model_name')!r}: use --format mmpretrain")
    kwargs = {k: v for k, v in backbone.items() if k not in _NOT_TIMM_ARGS}
    kwargs.setdefault('global_pool', 'token')
    if backbone.get('in_channels', 3) != 3:
        kwargs['in_chans'] = backbone['in_channels']
    state_dict = ckpt.get('state_dict', ckpt)
    tensors = {k: v.detach().cpu().clone().contiguous() for k, v in
               state_dict_of(ckpt, src, TIMM_PREFIX).items()}
    if any(k.startswith('head.layers.pre_logits') for k in state_dict):
        raise CheckpointMismatchError("The head's hidden pre-logits layer "
                                      "is not in timm's VisionTransformer")
    # mmpretrain heads whose classifier is one Linear, and where it is
    head = next((p for p in ('head.fc.', 'head.layers.head.')
                 if f'{p}weight' in state_dict), None)
    for name in (['head', 'head_dist'] if 'dist_token' in tensors else
                 ['head']) if head else []:
        for part in ('weight', 'bias'):
            tensors[f'{name}.{part}'] = state_dict[head + part].cpu().clone()
    kwargs['num_classes'] = len(tensors['head.bias']) if head else 0
    call = f"timm.create_model({backbone['model_name']!r}, **{kwargs})"
    try:  # the meta device: shapes only, whatever sizes the config gives
        with torch.device('meta'):
            net = timm.create_model(backbone['model_name'], pretrained=False,
                                    **kwargs)
    except (RuntimeError, TypeError, ValueError, AssertionError) as error:
        raise CheckpointMismatchError(f'{call} fails: {error}') from None
    load_strictly(net, tensors, repr(src), assign=True,
                  hint=f'The export must load into {call}.')
    atomic_write(dst, lambda f: torch.save(tensors, f))
    return dict(model_name=backbone['model_name'], kwargs=kwargs,
                num_tensors=len(tensors), head=head)
