"""Export a classifier checkpoint whose backbone is a timm ViT
(``PooledTIMMBackbone``) as a plain timm state dict.

A TL-Align (or CutMix) checkpoint of a ``PooledTIMMBackbone`` model holds
the timm model's tensors under ``backbone.timm_model.`` and the head's
``Linear`` under ``head.``. The export strips the prefix, renames the head
to timm's ``head.weight``/``head.bias`` (for distilled DeiT also
``head_dist``: timm averages ``head(cls)`` and ``head_dist(dist)``, which
with both set to the trained head is ``head((cls + dist) / 2)``, what the
mmpretrain head computed), and saves a dict of tensors only, which

.. code-block:: python

    model = timm.create_model(name, pretrained=False, **kwargs)
    model.load_state_dict(torch.load(path, weights_only=True), strict=True)

loads in any environment. ``name`` and ``kwargs`` are the training
config's (``model_name``, ``global_pool`` and the timm arguments given to
``PooledTIMMBackbone``, plus ``num_classes`` when it is not timm's 1000);
the export builds that model and loads the file strictly before it
returns, and returns them.
"""
from typing import Optional, Tuple

import torch
from mmengine.config import Config

from tlalign_mm.checkpoint import CheckpointMismatchError, load, parse_config
from tlalign_mm.models.tlalign_backbone import plain_backbone_cfg

from .export import unsafe_globals_without_allow_list

__all__ = ['export_timm', 'timm_create_args']

PREFIX = 'backbone.timm_model.'
#: mmpretrain heads whose classifier is one Linear, and where it is.
HEAD_LINEARS = ('head.fc.', 'head.layers.head.')
#: ``TIMMBackbone`` arguments that are not timm model arguments.
_NOT_TIMM_ARGS = ('type', 'init_cfg', 'pretrained', 'checkpoint_path',
                  'features_only', 'in_channels')


def timm_create_args(model_cfg: dict) -> Tuple[str, dict]:
    """``(model_name, kwargs)`` of ``timm.create_model`` for the timm model
    a classifier config's backbone builds (``PooledTIMMBackbone``, possibly
    inside ``TLAlignBackbone``), without the head size."""
    backbone = plain_backbone_cfg(dict(model_cfg['backbone']))
    if backbone.get('type') != 'PooledTIMMBackbone':
        raise ValueError(
            f"--format timm exports PooledTIMMBackbone models; this "
            f"config's backbone is {backbone.get('type')!r}.")
    kwargs = {k: v for k, v in backbone.items() if k not in _NOT_TIMM_ARGS}
    kwargs.setdefault('global_pool', 'token')
    if backbone.get('in_channels', 3) != 3:
        kwargs['in_chans'] = backbone['in_channels']
    return kwargs.pop('model_name'), kwargs


def _model_cfg(ckpt: dict, config: Optional[str], src: str) -> dict:
    if config is not None:
        return Config.fromfile(config).model.to_dict()
    text = (ckpt.get('meta') or {}).get('cfg')
    if not isinstance(text, str):
        raise CheckpointMismatchError(
            f'{src!r} records no config (meta.cfg), so the timm model '
            'name is unknown: pass the training config (--config).')
    try:  # parsed, never executed
        return parse_config(text)['model']
    except (ValueError, KeyError) as error:
        raise CheckpointMismatchError(
            f'{src!r}: its meta.cfg is not a plain config ({error}); pass '
            'the training config (--config).') from None


def export_timm(src: str, dst: str, config: Optional[str] = None) -> dict:
    """Write the timm state dict of checkpoint ``src`` to ``dst``.

    Args:
        src (str): a Runner checkpoint of a classifier whose backbone is a
            ``PooledTIMMBackbone``.
        dst (str): output path.
        config (str, optional): the training config; by default the one
            the checkpoint records.

    Returns:
        dict: ``model_name``, ``kwargs`` (``timm.create_model``'s, with
        ``num_classes``), ``num_tensors``, ``head`` (the checkpoint's head
        keys exported, or ``None``).

    Raises:
        CheckpointMismatchError: no timm tensors, a head timm cannot hold, or a
            state dict that ``timm.create_model`` does not load strictly.
    """
    import timm
    ckpt = load(src)
    state_dict = ckpt.get('state_dict', ckpt)
    model_name, kwargs = timm_create_args(_model_cfg(ckpt, config, src))
    tensors = {
        k[len(PREFIX):]: v.detach().to('cpu').clone().contiguous()
        for k, v in state_dict.items() if k.startswith(PREFIX)
    }
    if not tensors:
        raise CheckpointMismatchError(
            f'No key of {src!r} starts with {PREFIX!r}.')
    if any(k.startswith('head.layers.pre_logits') for k in state_dict):
        raise CheckpointMismatchError(
            'The head has a hidden pre-logits layer, which timm\'s '
            'VisionTransformer does not have.')
    head = next((p for p in HEAD_LINEARS if f'{p}weight' in state_dict),
                None)
    num_classes = 0
    if head is not None:
        names = ['head'] + (['head_dist'] if 'dist_token' in tensors else [])
        for name in names:
            for part in ('weight', 'bias'):
                tensors[f'{name}.{part}'] = \
                    state_dict[f'{head}{part}'].detach().cpu().clone()
        num_classes = tensors['head.weight'].shape[0]
    kwargs['num_classes'] = num_classes
    model = timm.create_model(model_name, pretrained=False, **kwargs)
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as error:
        raise CheckpointMismatchError(
            f'timm.create_model({model_name!r}, **{kwargs}) does not load '
            f'the export strictly: {error}') from error
    torch.save(tensors, dst)
    unsafe = unsafe_globals_without_allow_list(dst)
    if unsafe:  # cannot happen with tensors only; make sure
        raise RuntimeError(f'{dst} would need allow-listed globals: {unsafe}')
    return dict(model_name=model_name, kwargs=kwargs,
                num_tensors=len(tensors), head=head)
