"""Pure-torch TL-Align: token labels, the alignment rule and the loop that
applies it to a recorded forward, head-mean attention.

Nothing here imports OpenMMLab; :mod:`tlalign_mm.models` adapts it.
"""
from .alignment import align, residual_align, resolve_align_layers
from .attention import head_mean_attention, mean_probs_attention
from .mix_record import MixRecord
from .records import Attention, DropPath, HeadInput, Keys, TokenStep
from .token_labels import (
    flatten_label_map,
    label_map_of,
    window_mean,
    with_extra_tokens,
)

__all__ = [
    'align', 'residual_align', 'resolve_align_layers', 'head_mean_attention',
    'mean_probs_attention', 'MixRecord', 'Attention', 'DropPath',
    'HeadInput', 'Keys', 'TokenStep', 'window_mean', 'flatten_label_map',
    'label_map_of', 'with_extra_tokens'
]
