"""Pure-torch TL-Align: token labels, the alignment rule, the fused trick.

Nothing here imports OpenMMLab; :mod:`tlalign_mm.models` adapts it.
"""
from .alignment import AlignmentState, residual_align
from .fused_attention import attention_with_labels
from .mix_record import MixRecord
from .token_labels import (
    flatten_label_map,
    label_map_of,
    window_mean,
    with_extra_tokens,
)

__all__ = [
    'AlignmentState', 'residual_align', 'attention_with_labels', 'MixRecord',
    'window_mean', 'flatten_label_map', 'label_map_of', 'with_extra_tokens'
]
