"""Recorders: what each family records and how its labels map to keys.
Dispatch is by attention module (:attr:`Recorder.attention_types`) and
token rules by module type (:mod:`.token_rules`), so a backbone assembled
from supported modules (``DeiT3``, SL-ViT) needs no code of its own.
"""
import torch.nn as nn

from .base import Block, Recorder, Recording, label_math
from .beit import BEiTRecorder
from .pvt import PVTRecorder
from .swin import SwinRecorder
from .timm_vit import TimmViTRecorder
from .token_rules import register_token_rule, token_labels, token_rule
from .vit import ViTRecorder

RECORDERS = (ViTRecorder(), SwinRecorder(), PVTRecorder(), TimmViTRecorder(),
             BEiTRecorder())


def get_recorder(backbone) -> Recorder:
    """The recorder whose attention modules ``backbone`` contains, or a
    clear error naming what is supported."""
    if not isinstance(backbone, nn.Module):
        raise TypeError(
            'TL-Align records a backbone module, got '
            f'{type(backbone).__name__} (note: mmpretrain backbones\' .eval()'
            ' and .train() return None, so call them on their own line).')
    found = [r for r in RECORDERS if r.supports(backbone)]
    if len(found) == 1:
        return found[0]
    if not found:
        kinds = '; '.join(
            f'{type(r).__name__}: {", ".join(r.attention_types)}'
            for r in RECORDERS)
        raise NotImplementedError(
            f'TL-Align has no recorder for {type(backbone).__name__}: it '
            f'holds none of the attention modules recorders read ({kinds}); '
            'see docs/design.md, "Adding a backbone".')
    raise NotImplementedError(
        f'{type(backbone).__name__} mixes the attention modules of '
        f'{", ".join(type(r).__name__ for r in found)}; TL-Align records '
        'one family per backbone.')


def start_recording(backbone: nn.Module) -> Recording:
    """A :class:`Recording` of ``backbone`` by its family's recorder."""
    return Recording(backbone, get_recorder(backbone))


__all__ = [
    'BEiTRecorder',
    'Block', 'PVTRecorder', 'RECORDERS', 'Recorder', 'Recording',
    'SwinRecorder', 'TimmViTRecorder', 'ViTRecorder', 'get_recorder',
    'label_math', 'register_token_rule', 'start_recording', 'token_labels',
    'token_rule'
]
