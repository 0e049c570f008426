"""tlalign_mm.analysis.mixing_ratio: the similarity ratio by hand, and the
series are the labels they name."""
import pytest
import torch

from tlalign_mm import align_labels
from tlalign_mm.analysis.mixed_batches import mixed_batches
from tlalign_mm.analysis.mixing_ratio import mixing_ratios, similarity_ratio


def test_similarity_ratio_is_the_hand_computation():
    a = torch.tensor([[1., 0.], [1., 0.], [1., 0.]])
    b = torch.tensor([[0., 1.], [0., 1.], [0., 1.]])
    z = torch.tensor([[3., 1.], [1., 1.], [-1., -1.]])
    ca, cb = 3 / 10**0.5, 1 / 10**0.5  # the cosines, negative ones as 0
    torch.testing.assert_close(similarity_ratio(z, a, b),
                               torch.tensor([ca / (ca + cb), 0.5, 0.5]))


@pytest.mark.parametrize('arch', ['vit', 'swin'])
def test_series_are_the_labels_they_name(setups, arch):
    model = setups[arch].model
    batch = next(mixed_batches(model, setups[arch].loader, num_images=4))
    out, record = mixing_ratios(model, batch), batch.record
    # 4 blocks: the ViT's 4 layers, the Swin's 2 + 2.
    assert out['similarity'].shape == out['tlalign'].shape == (4, 4)
    assert 0 <= out['similarity'].min() <= out['similarity'].max() <= 1
    torch.testing.assert_close(out['cutmix'], record.area_share[:, 0])
    final = align_labels(model.backbone, batch.mixed, record.pixel_weights,
                         torch.eye(2).expand(4, 2, 2), record.area_share)
    torch.testing.assert_close(out['tlalign'][:, -1], final[:, 0])
    assert ('transmix' in out) == (arch == 'vit')  # needs a class token
