"""``TLAlignBackbone``: the registered entry that makes a backbone ready for
Token-Label Alignment."""
from typing import Iterable, Optional, Union

import torch.nn as nn
from mmpretrain.registry import MODELS

from .tracers import get_tracer, install

_OPTIONS = ('align_layers', 'residual_norm', 'follow_drop_path')


@MODELS.register_module(name='TLAlignBackbone')
def build_tlalign_backbone(backbone: dict,
                           align_layers: Union[str, Iterable[int]] = 'all',
                           residual_norm: bool = True,
                           follow_drop_path: bool = True,
                           init_cfg: Optional[dict] = None) -> nn.Module:
    """Build ``backbone`` and install TL-Align's tracing on it.

    The result is the plain backbone (its own class, forward, parameter
    names and state dict), so checkpoints are plain backbone checkpoints,
    inference and evaluation are the backbone's own, and nothing downstream
    needs to know about TL-Align. What is added: the tracer's taps (public
    torch hooks, and a stand-in for the attention function ViT blocks call),
    which do nothing outside a traced forward, and the options below, which
    :func:`tlalign_mm.models.traced_forward` uses.

    Args:
        backbone (dict): config of the backbone, e.g.
            ``dict(type='VisionTransformer', arch='deit-small')``.
        align_layers (str | list[int]): ``'all'`` (default), ``'last'`` or
            the block indices that align labels (the paper's Table 8);
            checked against the built backbone.
        residual_norm (bool): average with the residual, ``(Y + ĀY) / 2``
            (default), or not, ``ĀY``.
        follow_drop_path (bool): a sample whose attention branch drop-path
            removed keeps its labels in that block (default). ``False``
            reproduces the original code, which ignores drop-path.
        init_cfg (dict, optional): the backbone's ``init_cfg`` (e.g.
            ``Pretrained``), if not given inside ``backbone``.

    Returns:
        nn.Module: the backbone, tracing installed.
    """
    if init_cfg is not None:
        if backbone.get('init_cfg') is not None:
            raise ValueError('Give init_cfg in the backbone config or on '
                             'TLAlignBackbone, not both.')
        backbone = dict(backbone, init_cfg=init_cfg)
    module = MODELS.build(backbone)
    install(module, get_tracer(module), align_layers, residual_norm,
            follow_drop_path)
    return module


# The name configs use; ``TLAlignBackbone(...)`` builds like a class would.
TLAlignBackbone = build_tlalign_backbone


def plain_backbone_cfg(cfg: dict) -> dict:
    """The config of the backbone a (possibly ``TLAlignBackbone``) backbone
    config builds, without the alignment options."""
    while cfg.get('type') in ('TLAlignBackbone', build_tlalign_backbone):
        inner = dict(cfg['backbone'])
        if cfg.get('init_cfg') is not None:
            inner['init_cfg'] = cfg['init_cfg']
        cfg = inner
    return cfg


def tlalign_backbone_cfg(cfg: dict, **options) -> dict:
    """``cfg`` as a ``TLAlignBackbone`` config: wrapped with ``options``, or,
    if it already is one, checked not to get ``options`` twice."""
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise ValueError(f'Unknown TL-Align options {sorted(unknown)}; '
                         f'known: {list(_OPTIONS)}.')
    if cfg.get('type') in ('TLAlignBackbone', build_tlalign_backbone):
        if options:
            raise ValueError('Give align_cfg or a TLAlignBackbone config '
                             'with its options, not both.')
        return cfg
    return dict(type='TLAlignBackbone', backbone=cfg, **options)
