"""Analyses of token fluctuation and TL-Align's labels (the paper's Figs.
3-5), behind ``tools/analysis/``: :mod:`.label_rmse` (Fig. 3),
:mod:`.presence` (Eq. 2), :mod:`.mixing_ratio` (Fig. 4) and
:mod:`.label_maps` (Fig. 5); :mod:`.mixed_batches` and :mod:`.session` set
them up, :mod:`.figures` draws them, :mod:`.paired_stats` compares seeds.
"""
from .label_maps import LabelMaps, label_colours, label_maps, token_grid
from .label_rmse import RMSEMeter, aligned_source_weights, label_rmse
from .mixed_batches import (
    MIXES,
    MixedBatch,
    build_mixer,
    mixed_batches,
    seeded,
)
from .mixing_ratio import block_readouts, mixing_ratios, similarity_ratio
from .presence import LayerPresence, token_presence

__all__ = [
    'LabelMaps', 'LayerPresence', 'MixedBatch', 'RMSEMeter', 'MIXES',
    'aligned_source_weights', 'block_readouts', 'build_mixer',
    'label_colours', 'label_maps', 'label_rmse', 'mixed_batches',
    'mixing_ratios', 'seeded', 'similarity_ratio', 'token_grid',
    'token_presence'
]
