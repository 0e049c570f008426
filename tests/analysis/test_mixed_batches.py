"""tlalign_mm.analysis.mixed_batches: batch ``i`` is the named recording
augmentation's mix of the preprocessed batch under seed ``seed + i``."""
import pytest
import torch
import torch.nn.functional as F

from tlalign_mm.analysis.mixed_batches import (
    MIXERS,
    build_mixer,
    mixed_batches,
    seeded,
)
from tlalign_mm.mixing import TLCutMix, TLMixup, TLResizeMix


def test_the_names_are_the_recording_augments():
    assert MIXERS == {'cutmix': TLCutMix, 'mixup': TLMixup,
                      'resizemix': TLResizeMix}
    assert build_mixer('none') is None
    assert build_mixer('resizemix', alpha=0.5).alpha == 0.5
    with pytest.raises(ValueError, match="'resizemix', 'none', got 'fmix'"):
        build_mixer('fmix')


@pytest.mark.parametrize('mix', sorted(MIXERS))
def test_each_batch_is_the_augments_seeded_mix(setups, mix):
    s = setups['vit']
    batches = list(mixed_batches(s.model, s.loader, mix, alpha=1.0, seed=7,
                                 max_batches=2))
    assert len(batches) == 2
    for i, (batch, data) in enumerate(zip(batches, s.loader)):
        labels = torch.cat([x.gt_label for x in data['data_samples']])
        with seeded(7 + i):
            mixed, mixed_scores, record = MIXERS[mix](alpha=1.0
                                                      ).mix_with_record(
                batch.inputs, F.one_hot(labels, 10).float())
        assert torch.equal(batch.mixed, mixed)
        assert torch.equal(batch.record.pixel_weights, record.pixel_weights)
        # The record's sources and shares give the augment's own scores.
        torch.testing.assert_close(
            (batch.record.area_share[..., None] * batch.targets).sum(1),
            mixed_scores)
