"""Analyses of token fluctuation and TL-Align's labels (the paper's Figs.
3-5), behind the scripts in ``tools/analysis/``.

- :mod:`.label_rmse`: how far alignment moves the CutMix target (Fig. 3).
- :mod:`.presence`: token presence per block, Eq. 2.
- :mod:`.mixing_ratio`: layer-wise mixing ratio of the classified token by
  feature similarity, against CutMix, TransMix and TL-Align (Fig. 4).
- :mod:`.label_maps`: initial and aligned label maps (Fig. 5).
- :mod:`.mixed_batches`, :mod:`.session`: data, model and outputs;
  :mod:`.figures`: the plots.
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
from .mixing_ratio import (
    block_readouts,
    mixing_ratios,
    readout_tokens,
    similarity_ratio,
    transformer_blocks,
)
from .presence import LayerPresence, token_presence

__all__ = [
    'LabelMaps', 'LayerPresence', 'MixedBatch', 'RMSEMeter',
    'MIXES', 'aligned_source_weights', 'block_readouts', 'build_mixer',
    'label_colours', 'label_maps', 'label_rmse', 'mixed_batches',
    'mixing_ratios', 'readout_tokens', 'seeded', 'similarity_ratio',
    'token_grid', 'token_presence', 'transformer_blocks'
]
