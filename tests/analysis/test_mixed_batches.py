"""tlalign_mm.analysis.mixed_batches: batch ``i`` is the named recording
augmentation's mix of the preprocessed batch under seed ``seed + i``."""
import pytest
import torch
import torch.nn.functional as F

from tlalign_mm.analysis.mixed_batches import (
    MIXERS,
    MIXES,
    build_mixer,
    mixed_batches,
    seeded,
)
from tlalign_mm.mixing import TLCutMix, TLMixup, TLResizeMix


def test_the_names_are_the_recording_augments():
    assert MIXERS == {'cutmix': TLCutMix, 'mixup': TLMixup,
                      'resizemix': TLResizeMix}
    assert MIXES[-1] == 'none' and build_mixer('none') is None
    mixer = build_mixer('resizemix', alpha=0.5)
    assert isinstance(mixer, TLResizeMix) and mixer.alpha == 0.5
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
        scores = F.one_hot(labels, 10).float()
        with seeded(7 + i):
            mixed, mixed_scores, record = MIXERS[mix](
                alpha=1.0).mix_with_record(batch.inputs, scores)
        assert torch.equal(batch.mixed, mixed)
        assert torch.equal(batch.record.pixel_weights, record.pixel_weights)
        # The record's sources and shares give the augment's own scores.
        torch.testing.assert_close(
            (batch.record.area_share[..., None] * batch.targets).sum(1),
            mixed_scores)


def test_resizemix_pastes_a_whole_partner_into_a_box(setups):
    s = setups['vit']
    batch = next(mixed_batches(s.model, s.loader, 'resizemix', seed=1,
                               max_batches=1))
    pw = batch.record.pixel_weights
    torch.testing.assert_close(pw.sum(1), torch.ones_like(pw[:, 0]))
    # Every pixel is from one source: inside the box wholly the partner's.
    assert ((pw == 0) | (pw == 1)).all()
    boxed = pw[:, 1].flatten(1).mean(1)
    assert ((boxed > 0) & (boxed < 1)).all()
    torch.testing.assert_close(batch.record.area_share[:, 1], boxed)
