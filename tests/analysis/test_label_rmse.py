"""tlalign_mm.analysis.label_rmse: the RMSE between aligned and area
labels, by hand, and zero where the labels cannot move."""
import pytest
import torch

from tlalign_mm.analysis.label_rmse import RMSEMeter, label_rmse
from tlalign_mm.analysis.mixed_batches import mixed_batches


def test_meter_is_the_hand_computation():
    """Aligned (0.7, 0.3), (0.5, 0.5) against area (0.6, 0.4), (0.5, 0.5)
    (the 2nd image of one class): differences (0.1, -0.1) and (0, 0), 4
    entries, 2 images."""
    meter = RMSEMeter()
    meter.update(torch.tensor([[0.7, 0.3], [0.5, 0.5]]), torch.tensor([
        [0.6, 0.4], [0.5, 0.5]]), torch.eye(3)[torch.tensor([[0, 1], [2, 2]])])
    out = meter.result()
    assert [out[k] for k in ('rmse', 'rmse_class', 'mean_abs')] == \
        pytest.approx([(0.02 / 4)**0.5, (0.02 / 2)**0.5, 0.2 / 4])
    assert out['num_images'] == 2


@pytest.mark.parametrize('arch, mix, identity', [
    ('vit', 'mixup', False), ('swin', 'mixup', False),
    ('vit', 'resizemix', True)])
def test_labels_that_cannot_move_give_zero(setups, monkeypatch, arch, mix,
                                           identity):
    """MixUp (one mix at every pixel), or attention that moves nothing (every
    token attends to itself only); the real attention moves a box mix."""
    import tlalign_mm.core.records
    from tests.models.zoo import identity_attention
    s = setups[arch]

    def rmse():
        return label_rmse(s.model, mixed_batches(s.model, s.loader, mix,
                                                 max_batches=1))

    with monkeypatch.context() as patch:
        if identity:
            patch.setattr(tlalign_mm.core.records, 'head_mean_attention',
                          identity_attention)
        out = rmse()
    assert out['num_images'] == 8
    assert max(out['rmse'], out['rmse_class']) < 1e-6
    assert not identity or rmse()['rmse'] > 1e-3
