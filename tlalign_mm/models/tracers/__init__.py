"""Tracers: how token labels flow through each family of backbones.

Dispatch is by module, not by backbone class: a backbone's tracer is the one
whose attention modules it contains (:attr:`Tracer.attention_types`), and
the modules that make tokens get their labels from one table of rules
(:mod:`.token_rules`). So a subclass, or a new backbone assembled from
supported attention and embedding modules (e.g. mmpretrain's ``DeiT3``, SL-ViT
with SPT and LSA), needs no tracer code of its own.
"""
import torch.nn as nn

from .base import (
    BlockTrace,
    TracedBlock,
    Tracer,
    TraceSession,
    begin_trace,
    install,
    installed_session,
    label_math,
)
from .pvt import PVTTracer
from .swin import SwinTracer
from .timm_vit import TimmViTTracer
from .token_rules import register_token_rule, token_labels, token_rule
from .vit import ViTTracer

TRACERS = (ViTTracer(), SwinTracer(), PVTTracer(), TimmViTTracer())


def get_tracer(backbone) -> Tracer:
    """The tracer whose attention modules ``backbone`` contains, or a clear
    error naming what is supported."""
    if not isinstance(backbone, nn.Module):
        raise TypeError(
            f'TL-Align traces a backbone module, got {type(backbone).__name__}'
            ' (note: mmpretrain backbones\' .eval() and .train() return None,'
            ' so call them on their own line).')
    session = installed_session(backbone)
    if session is not None:
        return session.tracer
    found = [t for t in TRACERS if t.supports(backbone)]
    if len(found) == 1:
        return found[0]
    if not found:
        kinds = '; '.join(
            f'{type(t).__name__}: {", ".join(t.attention_types)}'
            for t in TRACERS)
        raise NotImplementedError(
            f'TL-Align has no tracer for {type(backbone).__name__}: it '
            f'contains none of the attention modules the tracers read '
            f'({kinds}). Supported backbones: mmpretrain VisionTransformer '
            '(ViT, DeiT, distilled DeiT, DeiT3), SwinTransformer, SLViT, '
            "SLSwin, mmdet's PyramidVisionTransformer(V2), and timm's "
            'VisionTransformer family (through PooledTIMMBackbone). Add a '
            'Tracer in tlalign_mm/models/tracers/ for another attention '
            'module.')
    raise NotImplementedError(
        f'{type(backbone).__name__} mixes the attention modules of '
        f'{", ".join(type(t).__name__ for t in found)}; TL-Align traces one '
        'family per backbone.')


__all__ = [
    'BlockTrace', 'PVTTracer', 'SwinTracer', 'TRACERS', 'TimmViTTracer',
    'TraceSession', 'TracedBlock', 'Tracer', 'ViTTracer', 'begin_trace',
    'get_tracer', 'install', 'installed_session', 'label_math',
    'register_token_rule', 'token_labels', 'token_rule'
]
