"""``TLAlignBackbone``: the registered config entry for a backbone trained
with Token-Label Alignment.

It is a *builder function*, registered under the name configs use; what it
returns is the plain backbone module (its own class: there is no
``TLAlignBackbone`` class to ``isinstance``). The alignment options in its
config are read by ``TLAlignClassifier`` from the config
(:func:`split_tlalign_backbone_cfg`), not stored on the module.
"""
from typing import Iterable, Optional, Tuple, Union

import torch.nn as nn
from mmpretrain.registry import MODELS

from tlalign_mm.core import resolve_align_layers

from .recorders import get_recorder

_OPTIONS = ('align_layers', 'residual_norm', 'follow_drop_path')
_DEFAULTS = dict(align_layers='all', residual_norm=True,
                 follow_drop_path=True)


@MODELS.register_module(name='TLAlignBackbone')
def build_tlalign_backbone(backbone: dict,
                           align_layers: Union[str, Iterable[int]] = 'all',
                           residual_norm: bool = True,
                           follow_drop_path: bool = True,
                           init_cfg: Optional[dict] = None) -> nn.Module:
    """Build ``backbone`` and check that TL-Align can record it and that the
    alignment options fit it.

    The result is the plain backbone (its own class, forward, parameter
    names and state dict, no hooks), so checkpoints are plain backbone
    checkpoints and nothing downstream needs to know about TL-Align.

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

    The options take effect in ``TLAlignClassifier`` (which reads them from
    this config) and as arguments of :func:`tlalign_mm.align_labels`; the
    returned module carries none.

    Returns:
        nn.Module: the plain backbone.
    """
    if init_cfg is not None:
        if backbone.get('init_cfg') is not None:
            raise ValueError('Give init_cfg in the backbone config or on '
                             'TLAlignBackbone, not both.')
        backbone = dict(backbone, init_cfg=init_cfg)
    module = MODELS.build(backbone)
    recorder = get_recorder(module)
    recorder.check(module)
    resolve_align_layers(align_layers, recorder.num_layers(module))
    return module


# The name configs use.
TLAlignBackbone = build_tlalign_backbone


def plain_backbone_cfg(cfg: dict) -> dict:
    """The config of the backbone a (possibly ``TLAlignBackbone``) backbone
    config builds, without the alignment options."""
    return split_tlalign_backbone_cfg(cfg)[0]


def split_tlalign_backbone_cfg(cfg: dict, align_cfg: Optional[dict] = None
                               ) -> Tuple[dict, dict]:
    """``(plain backbone config, alignment options)`` of a plain or
    ``TLAlignBackbone`` config and the classifier's ``align_cfg``; the
    options given once, in one of the two places."""
    options = dict(align_cfg or {})
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise ValueError(f'Unknown TL-Align options {sorted(unknown)}; '
                         f'known: {list(_OPTIONS)}.')
    while cfg.get('type') in ('TLAlignBackbone', build_tlalign_backbone):
        inner = dict(cfg['backbone'])
        if cfg.get('init_cfg') is not None:
            inner['init_cfg'] = cfg['init_cfg']
        given = {k: cfg[k] for k in _OPTIONS if k in cfg}
        if given and options:
            raise ValueError('Give align_cfg or a TLAlignBackbone config '
                             'with its options, not both.')
        options.update(given)
        cfg = inner
    return cfg, dict(_DEFAULTS, **options)
