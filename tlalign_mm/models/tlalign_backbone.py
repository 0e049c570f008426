"""``TLAlignBackbone``: the wrapper spelling the project was specified
with, ``backbone=dict(type='TLAlignBackbone', backbone=dict(...),
align_layers=..., ...)``, kept as a spelling of the one line.

``TLAlignClassifier`` unwraps it when it is built (:func:`unwrap`): the
backbone is the wrapped config, the options move to ``align_cfg`` (checked
there, their one home), so nothing of the wrapper is built. Anywhere else
(a plain ``ImageClassifier``) the registered name raises with the fix.
"""
from dataclasses import fields
from typing import Optional, Tuple

from mmpretrain.registry import MODELS

from tlalign_mm.core import AlignOptions

WRAPPER = 'TLAlignBackbone'
#: The wrapper's own keys besides the alignment options.
_OWN = ('type', 'backbone', 'init_cfg')


@MODELS.register_module(name=WRAPPER)
def tlalign_backbone_outside_the_classifier(backbone=None, **options):
    """Raise: the wrapper is a spelling of ``TLAlignClassifier``'s options
    and is unwrapped by it; built by anything else, it says so."""
    raise ValueError(
        f'{WRAPPER} is unwrapped by TLAlignClassifier, which moves its '
        "options to align_cfg: set the model's type='TLAlignClassifier' "
        "(model = dict(type='TLAlignClassifier')).")


def _is_wrapper(cfg) -> bool:
    kind = cfg.get('type') if isinstance(cfg, dict) else None
    return kind in (WRAPPER, tlalign_backbone_outside_the_classifier)


def unwrap(backbone, align_cfg: Optional[dict]) -> Tuple[object, dict]:
    """``(backbone config, align_cfg)`` of a classifier given ``backbone``
    (a ``TLAlignBackbone`` config, or any other, returned as it is) and
    ``align_cfg``: the wrapper's ``init_cfg`` goes into its backbone config,
    its alignment options into ``align_cfg``. Keys that are neither the
    wrapper's nor an option are what a ``_base_`` backbone config merges
    into the wrapper (``arch``, ``img_size``): left out where the wrapped
    config has them with the same value. Refused, each with its fix: such a
    key it does not have (or has otherwise), and an option also given in
    ``align_cfg`` (one home)."""
    if not _is_wrapper(backbone):
        return backbone, align_cfg
    known = [f.name for f in fields(AlignOptions)]
    cfg = dict(backbone)
    if not isinstance(cfg.get('backbone'), dict):
        raise ValueError(f'{WRAPPER} needs the backbone config as '
                         f"`backbone`, e.g. backbone=dict(type="
                         f"'VisionTransformer', ...); got "
                         f'{cfg.get("backbone")!r}.')
    inner = dict(cfg['backbone'])
    stray = sorted(k for k in set(cfg) - set(_OWN) - set(known)
                   if k not in inner or inner[k] != cfg[k])
    if stray:
        raise ValueError(
            f'{WRAPPER} takes `backbone`, `init_cfg` and the alignment '
            f'options {known}; {stray} are none of them, nor the same in its '
            'backbone=dict(...). Backbone options go inside backbone=dict('
            '...) (merged into the wrapper from a `_base_` backbone? write '
            'the wrapper with _delete_=True).')
    if cfg.get('init_cfg') is not None:
        if inner.get('init_cfg') is not None:
            raise ValueError(f'Give init_cfg in the backbone config or on '
                             f'{WRAPPER}, not both.')
        inner['init_cfg'] = cfg['init_cfg']
    options = {k: cfg[k] for k in known if k in cfg}
    given = dict(align_cfg or {})
    twice = sorted(set(options) & set(given))
    if twice:
        raise ValueError(
            f'TL-Align options {twice} are given twice, on {WRAPPER} and in '
            'align_cfg: keep one home (align_cfg).')
    return unwrap(inner, dict(given, **options))


def plain_backbone_cfg(cfg: dict) -> dict:
    """The backbone config inside a ``TLAlignBackbone`` one (an older
    checkpoint's ``meta.cfg``); any other config as it is."""
    while _is_wrapper(cfg):
        inner = dict(cfg['backbone'])
        if cfg.get('init_cfg') is not None:
            inner['init_cfg'] = cfg['init_cfg']
        cfg = inner
    return cfg
