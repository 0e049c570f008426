"""tlalign_mm.analysis.session: a model built without a checkpoint is the
same model for the same seed, whatever the global random state, and leaves
that state as it was."""
import torch

from tlalign_mm.analysis.session import build_model, load_config

from .conftest import VIT_CONFIG


def test_the_seed_alone_sets_every_weight():
    def weights(seed, global_seed):
        torch.manual_seed(global_seed)
        model = build_model(load_config(VIT_CONFIG, {}), 'none', seed=seed)
        return model.state_dict(), torch.rand(3)

    (first, after), (second, _) = weights(0, 1), weights(0, 2)
    torch.manual_seed(1)
    assert torch.equal(after, torch.rand(3)), 'the global state moved'
    # The patch embedding's Conv2d keeps the weights it drew when built
    # (init_weights leaves it alone): the build must be seeded too.
    assert [k for k, v in first.items() if not torch.equal(v, second[k])] == []
    key = 'backbone.patch_embed.projection.weight'
    assert not torch.equal(first[key], weights(1, 1)[0][key])
