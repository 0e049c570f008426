"""Record, then align: what the recording hooks may and may not do.

- records hold no labels: the same forward with all-zero and with random
  pixel weights records identical tensors;
- a recorded forward is the plain forward: outputs and gradients bit for
  bit, in training and eval, with drop-path on and off;
- two backbones recorded in two threads at once each get their own labels;
- a family the package does not name is added by the one description
  function docs/design.md shows, and matches a dense reference.
"""
import os.path as osp
import re
import sys
import threading

import pytest
import torch
import torch.nn as nn
from mmcv.cnn.bricks.drop import DropPath
from mmcv.cnn.bricks.transformer import PatchEmbed

from tlalign_mm.models import aligned_forward, describe
from tlalign_mm.models.families import FAMILIES

from . import test_every_backbone as every
from .mixes import assert_history_close, random_mix

# the module (its name is also the function's, which tlalign_mm.models
# exports)
aligned_module = sys.modules['tlalign_mm.models.aligned_forward']


def recorded_tensors(backbone, images, pw, monkeypatch):
    """Every tensor in the slots ``align`` receives, in order."""
    seen = []
    align = aligned_module.align

    def spy(recorded, *args, **kwargs):
        seen.extend(t for slot in recorded.slots for t in vars(slot).values()
                    if isinstance(t, torch.Tensor))
        return align(recorded, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(aligned_module, 'align', spy)
        aligned_forward(backbone, images, pw)
    return seen


@pytest.mark.parametrize('name', every.NAMES)
def test_records_hold_no_labels(name, monkeypatch):
    backbone, side = every.build(name)
    images, pw, _ = random_mix(2, 2, side, side)
    zeros = torch.zeros_like(pw)
    ours = recorded_tensors(backbone, images, pw, monkeypatch)
    theirs = recorded_tensors(backbone, images, zeros, monkeypatch)
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
        assert not a.requires_grad


def outputs_and_grads(backbone, images, pw=None, seed=0):
    torch.manual_seed(seed)
    if pw is None:
        feats = backbone(images)
    else:
        feats = aligned_forward(backbone, images, pw).feats
    leaves = torch.utils._pytree.tree_leaves(feats)
    sum(leaf.float().square().sum() for leaf in leaves).backward()
    grads = [p.grad.clone() for p in backbone.parameters()
             if p.grad is not None]
    backbone.zero_grad(set_to_none=True)
    return [leaf.detach() for leaf in leaves], grads


@pytest.mark.parametrize('drop_path', [0., 0.5])
@pytest.mark.parametrize('training', [False, True])
@pytest.mark.parametrize('name', every.NAMES)
def test_a_recorded_forward_is_the_plain_forward(name, training, drop_path):
    backbone, side = every.build(name)
    every.set_drop_paths(backbone, drop_path)
    backbone.train(training)
    images, pw, _ = random_mix(4, 2, side, side)
    plain = outputs_and_grads(backbone, images)
    recorded = outputs_and_grads(backbone, images, pw)
    for ours, theirs in zip(recorded[0] + recorded[1], plain[0] + plain[1]):
        assert torch.equal(ours, theirs)
    assert len(recorded[1]) == len(plain[1]) > 0


def test_two_backbones_in_two_threads_get_their_own_labels():
    """Both forwards are inside their blocks at the same time (a barrier in
    the first block of each); each gets the labels it gets alone."""
    first, side = every.build('ViT')
    second, _ = every.build('Swin, padded')
    inputs = {id(first): random_mix(2, 2, side, side, seed=1),
              id(second): random_mix(2, 3, 70, 70, seed=2)}
    alone = {k: aligned_forward(b, *inputs[id(b)][:2]).weights
             for k, b in ((id(first), first), (id(second), second))}
    barrier = threading.Barrier(2, timeout=60)

    def meet(module, args):
        barrier.wait()

    for backbone in (first, second):
        describe(backbone).blocks[0].register_forward_pre_hook(meet)
    results, errors = {}, []

    def run(backbone):
        try:
            images, pw, _ = inputs[id(backbone)]
            results[id(backbone)] = aligned_forward(backbone, images,
                                                    pw).weights
        except Exception as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(b, ))
               for b in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for key, weights in alone.items():
        assert torch.equal(results[key], weights)


# -- a family the package does not name ----------------------------------
class ToyAttention(nn.Module):
    """Attention that computes its softmax through ``self.softmax``."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.softmax = nn.Softmax(-1)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.heads,
                                   -1).permute(2, 0, 3, 1, 4)
        attn = self.softmax(q @ k.transpose(-2, -1) * (C // self.heads)**-.5)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class ToyBlock(nn.Module):

    def __init__(self, dim=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = ToyAttention(dim)
        self.drop_path = DropPath(0.1)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm(x)))
        return x + self.mlp(x)


class ToyViT(nn.Module):
    """Patch tokens (no class token), toy attention, mean readout."""

    def __init__(self, dim=32, depth=2, patch=8):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels=3, embed_dims=dim,
                                      kernel_size=patch, stride=patch)
        self.blocks = nn.ModuleList(ToyBlock(dim) for _ in range(depth))

    def forward(self, x):
        x, _ = self.patch_embed(x)
        for block in self.blocks:
            x = block(x)
        return (x.mean(1), )


def the_design_doc_example():
    """The first Python block of docs/design.md's "Adding a backbone"."""
    root = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    with open(osp.join(root, 'docs', 'design.md')) as f:
        text = f.read().split('### Adding a backbone', 1)[1]
    namespace = {}
    exec(re.search(r'```python\n(.*?)```', text, re.S).group(1), namespace)
    return namespace['describe_toy_vit']


def test_the_design_doc_family_matches_a_dense_reference(monkeypatch):
    monkeypatch.setitem(FAMILIES, f'{__name__}.ToyAttention',
                        the_design_doc_example())
    torch.manual_seed(0)
    backbone = ToyViT().eval()
    with torch.no_grad():
        for block in backbone.blocks:
            block.attn.qkv.weight[:64].mul_(4)
    images, pw, _ = random_mix(2, 2, 32, 32, box=(3, 21, 5, 30))
    with torch.no_grad():
        ours = aligned_forward(backbone, images, pw, keep_history=True)
    # dense reference: explicit attention from each block's input
    inputs = []
    for block in backbone.blocks:
        block.attn.register_forward_hook(
            lambda m, args, out: inputs.append(args[0]))
    with torch.no_grad():
        backbone(images)
        Y = pw.reshape(2, 2, 4, 8, 4, 8).mean((3, 5)).flatten(2)
        Y = Y.transpose(1, 2).double()
        expected = [Y]
        for block, x in zip(backbone.blocks, inputs):
            B, N, C = x.shape
            q, k, _ = block.attn.qkv(x).view(B, N, 3, 2, -1).permute(
                2, 0, 3, 1, 4)
            A = torch.softmax(q @ k.transpose(-2, -1) * (C // 2)**-0.5, -1)
            Y = (Y + A.mean(1).double() @ Y) / 2
            expected.append(Y)
    assert_history_close(ours.history, expected, len(expected))
    assert (expected[-1] - expected[0]).abs().max() > 1e-3
    torch.testing.assert_close(ours.weights.double(), expected[-1].mean(1))
