"""Pure-torch TL-Align: token labels, the alignment rule and the loop that
applies it to a recorded forward, head-mean attention.

Nothing here imports OpenMMLab; :mod:`tlalign_mm.models` adapts it.
"""
from .alignment import align, label_math, residual_align
from .attention import head_mean_attention, mean_probs_attention
from .key_maps import Reduction, Windows
from .mix_record import MixRecord
from .options import AlignOptions, align_options, resolve_align_layers
from .queries import Pool, PooledQueries, QuerySubset
from .records import Recorded, Slot, TokenStep
from .token_labels import (
    flatten_label_map,
    label_map_of,
    readout,
    window_labels,
    window_mean,
    with_extra_tokens,
)

__all__ = [
    'AlignOptions', 'MixRecord', 'Pool', 'PooledQueries', 'QuerySubset',
    'Recorded', 'Reduction', 'Slot',
    'TokenStep', 'Windows', 'align', 'align_options', 'flatten_label_map',
    'head_mean_attention', 'label_map_of', 'label_math',
    'mean_probs_attention', 'readout', 'residual_align',
    'resolve_align_layers', 'window_labels', 'window_mean',
    'with_extra_tokens'
]
