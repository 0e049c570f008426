"""A TL-Align training step under ``torch.compile``: the same labels as
eager, and no graph break of the recording's own; traced eagerly, it reads
no tensor value back to the host. (The operations it adds per block are a
report, not a test: ``tools/benchmark.py --model deit-small --ops-only``.)

mmpretrain builds its drop-path rates with ``np.linspace``, so mmcv's
``DropPath`` holds numpy scalars, and dynamo breaks the graph on
``drop_prob == 0.`` (a numpy value is traced as a tensor). That break is
upstream and hits a plain CutMix step as much; the tests count breaks with
the rates as Python floats, where any remaining break is the recording's.
"""
import pytest
import torch

from . import zoo
from .test_tlalign_classifier import build as build_classifier
from .test_tlalign_classifier import mixed_batch
from .zoo import head_samples

# DeiT-S's and Swin-T's paths, narrowed: heads of 64 (the SDPA path of
# head-mean attention); window 7 on 14x14 tokens, then 7x7 (shifted
# windows, no padded window, as in training).
SMALL = {
    'deit': dict(
        backbone=dict(zoo.VIT, drop_path_rate=0.1, arch=dict(
            embed_dims=128, num_layers=2, num_heads=2,
            feedforward_channels=128)),
        head=dict(type='VisionTransformerClsHead', in_channels=128),
        side=32),
    'swin': dict(
        backbone=dict(zoo.SWIN, img_size=56, drop_path_rate=0.1, arch=dict(
            embed_dims=16, depths=[2, 1], num_heads=[1, 2])),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', in_channels=32),
        side=56),
}


def build(kind):
    """A training model whose drop-path rates are Python floats, and its
    CutMix batch (with the list the head's samples go to)."""
    spec = dict(SMALL[kind])
    side = spec.pop('side')
    model = build_classifier(num_classes=10, **spec)
    model.backbone.train()  # drop-path on
    for module in model.modules():
        if hasattr(module, 'drop_prob'):
            module.drop_prob = float(module.drop_prob)
    batch = mixed_batch(model, side=side)
    return model, dict(batch, targets=head_samples(model))


def aligned_scores(model, batch):
    """The training step's loss and the aligned targets its head got."""
    batch = dict(batch)
    targets = batch.pop('targets')
    losses = model(**batch, mode='loss')
    return sum(v for k, v in losses.items() if 'loss' in k), torch.stack(
        [s.gt_score for s in targets[-4:]])


@pytest.mark.parametrize('kind', [
    'deit', pytest.param('swin', marks=pytest.mark.e2e)])  # swin: ~1 min
def test_compiled_step_gives_the_eager_labels_in_one_graph(kind):
    from torch._dynamo.testing import CompileCounterWithBackend
    model, batch = build(kind)
    torch.manual_seed(2)  # the same drop-path draws in both runs
    eager_loss, eager = aligned_scores(model, batch)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend('aot_eager')
    torch.manual_seed(2)
    loss, scores = torch.compile(aligned_scores, backend=counter)(model,
                                                                  batch)
    torch.testing.assert_close(scores, eager, atol=1e-5, rtol=0)
    torch.testing.assert_close(loss, eager_loss, atol=1e-5, rtol=1e-5)
    # One graph: the recording (taps, slots) breaks nothing.
    assert counter.frame_count == 1, counter.frame_count
    loss.backward()  # the compiled graph trains
    assert model.backbone.patch_embed.projection.weight.grad is not None


@pytest.mark.parametrize('kind', ['deit', 'swin'])
def test_a_traced_step_reads_no_tensor_value_on_the_host(kind):
    from tlalign_mm.testing.cost import step_cost
    model, batch = build(kind)
    batch.pop('targets')
    _, syncs = step_cost(model, batch)
    assert syncs.calls == []
