"""tools/analysis/mixing_ratio.py and tlalign_mm.analysis.mixing_ratio."""
import csv
import json

import pytest
import torch

from tlalign_mm import align_labels
from tlalign_mm.analysis.mixed_batches import mixed_batches
from tlalign_mm.analysis.mixing_ratio import mixing_ratios, similarity_ratio

from .conftest import FEW


def test_similarity_ratio_is_the_hand_computation():
    a = torch.tensor([[1., 0.], [1., 0.], [1., 0.]])
    b = torch.tensor([[0., 1.], [0., 1.], [0., 1.]])
    z = torch.tensor([[3., 1.], [1., 1.], [-1., -1.]])
    ca = 3 / 10**0.5
    cb = 1 / 10**0.5
    torch.testing.assert_close(similarity_ratio(z, a, b),
                               torch.tensor([ca / (ca + cb), 0.5, 0.5]))


@pytest.mark.parametrize('arch', ['vit', 'swin'])
def test_series_are_the_labels_they_name(setups, arch):
    model = setups[arch].model
    batch = next(mixed_batches(model, setups[arch].loader, num_images=4))
    out = mixing_ratios(model, batch)
    record = batch.record
    # 4 blocks: the ViT's 4 layers, the Swin's 2 + 2.
    assert out['similarity'].shape == out['tlalign'].shape == (4, 4)
    assert ((out['similarity'] >= 0) & (out['similarity'] <= 1)).all()
    torch.testing.assert_close(out['cutmix'], record.area_share[:, 0])
    eye = torch.eye(2).expand(4, 2, 2)
    final = align_labels(model.backbone, batch.mixed, record.pixel_weights,
                         eye, record.area_share)
    torch.testing.assert_close(out['tlalign'][:, -1], final[:, 0])
    # TransMix needs a class token.
    assert ('transmix' in out) == (arch == 'vit')


def test_cli_plot_and_tables(setups, run_tool, tmp_path):
    rows = run_tool('mixing_ratio',
                    [*setups['vit'].paths, '--work-dir', tmp_path, *FEW])
    assert [r['block'] for r in rows] == [1, 2, 3, 4]
    for key in ('similarity', 'tlalign', 'cutmix', 'transmix',
                'tlalign_gap', 'cutmix_gap', 'transmix_gap'):
        assert key in rows[0]
    # CutMix and TransMix do not depend on the block; TL-Align does.
    assert len({r['cutmix'] for r in rows}) == 1
    assert len({r['transmix'] for r in rows}) == 1
    assert len({round(r['tlalign'], 6) for r in rows}) > 1
    with open(tmp_path / 'mixing_ratio_images.csv') as f:
        assert len(list(csv.DictReader(f))) == 8 * 4
    summary = json.loads((tmp_path / 'mixing_ratio.json').read_text())
    assert set(summary['mean_gap_over_blocks']) == {
        'tlalign_gap', 'cutmix_gap', 'transmix_gap'}
    assert (tmp_path / 'mixing_ratio.png').stat().st_size > 1000
