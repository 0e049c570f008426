"""tlalign_mm.analysis.session: a model built without a checkpoint is the
same model for the same seed, whatever the global random state."""
import torch

from tlalign_mm.analysis.session import build_model, load_config

from .conftest import VIT_CONFIG


def _weights(seed, global_seed):
    torch.manual_seed(global_seed)
    model = build_model(load_config(VIT_CONFIG, {}), 'none', seed=seed)
    return model.state_dict()


def test_the_seed_alone_sets_every_weight():
    first, second = _weights(0, global_seed=1), _weights(0, global_seed=2)
    # The patch embedding's Conv2d keeps the weights it drew when built
    # (init_weights leaves it alone): the build must be seeded too.
    for key, value in first.items():
        assert torch.equal(value, second[key]), key
    other = _weights(1, global_seed=1)
    assert not torch.equal(first['backbone.patch_embed.projection.weight'],
                           other['backbone.patch_embed.projection.weight'])


def test_the_global_random_state_is_left_as_it_was():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    build_model(load_config(VIT_CONFIG, {}), 'none', seed=0)
    assert torch.equal(torch.rand(3), expected)
