"""tools/analysis/label_rmse.py and tlalign_mm.analysis.label_rmse."""
import csv
import json

import pytest
import torch

from tlalign_mm.analysis.label_rmse import RMSEMeter, label_rmse
from tlalign_mm.analysis.mixed_batches import mixed_batches

from .conftest import FEW


def test_meter_is_the_hand_computation():
    meter = RMSEMeter()
    aligned = torch.tensor([[0.7, 0.3], [0.5, 0.5]])
    area = torch.tensor([[0.6, 0.4], [0.5, 0.5]])
    targets = torch.eye(3)[torch.tensor([[0, 1], [2, 2]])]  # 2nd: one class
    meter.update(aligned, area, targets)
    out = meter.result()
    # Differences (0.1, -0.1) and (0, 0): 4 entries, 2 images.
    assert out['rmse'] == pytest.approx((0.02 / 4)**0.5)
    assert out['rmse_class'] == pytest.approx((0.02 / 2)**0.5)
    assert out['mean_abs'] == pytest.approx(0.2 / 4)
    assert out['num_images'] == 2


def test_cli_table_and_plot_over_two_models(setups, run_tool, tmp_path):
    rows = run_tool('label_rmse', [*setups['vit'].paths,
                                   *setups['swin'].paths, '--names', 'vit',
                                   'swin', '--work-dir', tmp_path, *FEW])
    assert [r['model'] for r in rows] == ['vit', 'swin']
    for row in rows:
        assert row['num_images'] == 8
        assert row['rmse'] > 1e-3  # CutMix: alignment moves the label
    with open(tmp_path / 'label_rmse.csv') as f:
        table = list(csv.DictReader(f))
    assert float(table[0]['rmse']) == pytest.approx(rows[0]['rmse'])
    assert json.loads((tmp_path / 'label_rmse.json').read_text())[1][
        'model'] == 'swin'
    assert (tmp_path / 'label_rmse.png').stat().st_size > 1000


@pytest.mark.parametrize('arch, mix, identity', [
    ('vit', 'mixup', False), ('swin', 'mixup', False),
    ('vit', 'cutmix', True), ('vit', 'resizemix', True)])
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
    assert out['rmse'] < 1e-6 and out['rmse_class'] < 1e-6
    assert not identity or rmse()['rmse'] > 1e-3
