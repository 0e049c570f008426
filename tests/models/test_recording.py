"""Record, then align: what the recording hooks may and may not do.

- records hold no labels: the same forward with all-zero and with random
  pixel weights records identical tensors;
- a recorded forward is the plain forward: outputs and gradients bit for
  bit, in training and eval, with drop-path on and off;
- two backbones recorded in two threads at once each get their own labels;
- a family the package does not name is added here with its recording and
  key map alone, and matches a dense reference.
"""
import sys
import threading
from functools import partial
from typing import NamedTuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import PatchEmbed

from tlalign_mm.core import Attention, Keys
from tlalign_mm.models import aligned_forward
from tlalign_mm.models.recorders import Block, Recorder, Recording

from . import test_every_backbone as every
from .mixes import random_mix

# the module (its name is also the function's, which tlalign_mm.models
# exports)
aligned_module = sys.modules['tlalign_mm.models.aligned_forward']


def recorded_tensors(backbone, images, pw, monkeypatch):
    """Every tensor in the records ``align`` receives, in order."""
    seen = []
    align = aligned_module.align

    def spy(records, labels, *args, **kwargs):
        seen.extend(t for r in records for t in r
                    if isinstance(t, torch.Tensor))
        return align(records, labels, *args, **kwargs)

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
    for block in every.get_recorder(backbone).blocks(backbone):
        block.drop_path.drop_prob = drop_path
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
        block = every.get_recorder(backbone).blocks(backbone)[0].block
        block.register_forward_pre_hook(meet)
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


# -- a family the package does not name: keys pooled over token pairs ------
class PairPooledAttention(nn.Module):
    """Attention whose keys and values are the means of token pairs."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.q(x).view(B, N, self.heads, -1).transpose(1, 2)
        pooled = F.avg_pool1d(x.transpose(1, 2), 2).transpose(1, 2)
        k, v = self.kv(pooled).view(B, N // 2, 2, self.heads,
                                    -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))


class PairBlock(nn.Module):

    def __init__(self, dim=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = PairPooledAttention(dim)
        self.mlp = nn.Linear(dim, dim)

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class PairViT(nn.Module):
    """Patch tokens (no class token), pair-pooled attention, mean readout."""

    def __init__(self, dim=32, depth=2, patch=8):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels=3, embed_dims=dim,
                                      kernel_size=patch, stride=patch)
        self.blocks = nn.ModuleList(PairBlock(dim) for _ in range(depth))

    def forward(self, x):
        x, _ = self.patch_embed(x)
        for block in self.blocks:
            x = block(x)
        return (x.mean(1), )


# The family: its recording and key map, and nothing else (30 lines).
class PairKeys(NamedTuple):
    """Key map: a key's label is the mean label of its token pair."""
    padded = False

    def to_keys(self, labels):
        B, N, S = labels.shape
        return labels.view(B, N // 2, 2, S).mean(2)

    def to_queries(self, attended, mass):
        return attended, mass


def _record_q(recording, attn, module, args, out):
    if recording.active:
        B, N, _ = out.shape
        recording.add(Attention(out.detach().view(B, N, attn.heads,
                                                  -1).transpose(1, 2)))


def _record_k(recording, attn, module, args, out):
    if recording.active:
        B, M, _ = out.shape
        k = out.detach().view(B, M, 2, attn.heads, -1)[:, :, 0]
        recording.add(Keys(k.transpose(1, 2)))
        recording.add(PairKeys())


class PairViTRecorder(Recorder):
    attention_types = (f'{__name__}.PairPooledAttention', )

    def blocks(self, backbone):
        return [Block(b, b.attn, None) for b in backbone.blocks]

    def record_attention(self, block, recording):
        attn = block.attention
        return [attn.q.register_forward_hook(partial(_record_q, recording,
                                                     attn)),
                attn.kv.register_forward_hook(partial(_record_k, recording,
                                                      attn))]


def test_a_new_family_matches_a_dense_reference():
    torch.manual_seed(0)
    backbone = PairViT().eval()
    with torch.no_grad():
        for block in backbone.blocks:
            block.attn.q.weight.mul_(4)
    images, pw, _ = random_mix(2, 2, 32, 32, box=(3, 21, 5, 30))
    recording = Recording(backbone, PairViTRecorder())
    with torch.no_grad():
        ours = aligned_forward(backbone, images, pw, recording=recording,
                               keep_history=True)
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
            q = block.attn.q(x).view(B, N, 2, -1).transpose(1, 2)
            pooled = x.view(B, N // 2, 2, C).mean(2)
            k = block.attn.kv(pooled)[..., :C].view(B, N // 2, 2, -1)
            A = torch.softmax(q @ k.permute(0, 2, 3, 1) * (C // 2)**-0.5, -1)
            Y = (Y + A.mean(1).double() @ Y.view(B, N // 2, 2, -1).mean(2)) / 2
            expected.append(Y)
    assert len(ours.history) == len(expected)
    for a, b in zip(ours.history, expected):
        assert (a.double() - b).abs().max() <= 1e-5
    assert (expected[-1] - expected[0]).abs().max() > 1e-3
    torch.testing.assert_close(ours.weights.double(), expected[-1].mean(1))
