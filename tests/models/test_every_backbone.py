"""What every supported backbone must satisfy, one suite for all of them
(per-path exactness in eval: ``test_alignment.py``):

- labels are float32 distributions after every block;
- in training with drop-path and attention dropout, the labels are the
  dense reference's from the pre-dropout attention of that very forward,
  a sample whose attention branch was dropped keeps its labels, and the
  recorded forward draws the plain forward's random numbers: tokens and
  gradients bit for bit;
- a recorded backbone is the plain one, one test per property: same class
  and state dict, a plain checkpoint both ways, bit-identical evaluation,
  the kept recording aligns as a one-call one; records hold no labels and
  are detached; MixUp (the same mix at every pixel) is left unchanged by
  alignment; a deep copy (EMA) aligns on its own;
- two threads get their own labels;
- a family added by docs/design.md's description function is exact.
"""
import copy
import os.path as osp
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import pytest
import torch
import torch.nn as nn
from mmcv.cnn.bricks.drop import DropPath
from mmcv.cnn.bricks.transformer import PatchEmbed

from tlalign_mm import align_labels
from tlalign_mm.checkpoint import load_strictly
from tlalign_mm.models import Recording, aligned_forward, describe
from tlalign_mm.registry import FAMILIES

from . import zoo
from .dense import (
    ATTENTIONS,
    Facts,
    attention_calls,
    dense_labels,
    dense_reference,
    patch_means,
    token_attention,
)
from .test_alignment import CASES, assert_history_close
from .zoo import assert_distributions, random_mix

# One row of test_alignment's table per family and readout.
NAMES = ['ViT cls, box', 'ViT pooled, no cls, not a multiple of the patch',
         'DeiT distilled, other size', 'DeiT3 (not named by the package)',
         'ViT-like class (not named by the package)',
         'Swin pad_small_map, 3 stages', 'Swin V2 padded, box', 'PVT v2',
         'PVT v1 (position embedding)', 'SL-ViT pooled, corner padding',
         'SL-Swin box', 'timm DeiT, fused',
         'timm registers, qk-norm, avg, explicit',
         'timm distilled DeiT, explicit', 'BEiT relative bias, pooled',
         'BEiT shared bias, cls, final norm', 'EVA-02 RoPE, pooled',
         'HiViT relative bias', 'T2T-ViT cls', 'Twins PCPVT', 'Twins SVT',
         'DaViT', 'TinyViT', 'MViTv2 box',
         'LeViT subsampling, box', 'XCiT class attention, box']


def build(name, seed=0):
    return zoo.build(CASES[name].cfg, seed), CASES[name].size[0]


class BernoulliDropPath(nn.Module):
    """A drop-path whose RNG use differs from mmcv's and timm's: it draws
    its mask with ``torch.bernoulli`` on a float vector."""

    drop_prob = 0.5

    def forward(self, x):
        if not self.training:
            return x
        mask = torch.bernoulli(torch.full((x.shape[0], ), 0.5)) / 0.5
        return x * mask.view(-1, *([1] * (x.dim() - 1)))


def with_dropouts(backbone, drop_path=0.5, attention=0.2):
    """Drop-path ``drop_path`` everywhere, dropout ``attention`` on every
    attention matrix (and every other dropout)."""
    for m in backbone.modules():
        if 'DropPath' in type(m).__name__:
            m.drop_prob = drop_path
        elif isinstance(m, nn.Dropout):
            m.p = attention
        elif isinstance(m, nn.MultiheadAttention):  # PVT
            m.dropout = attention
        elif isinstance(getattr(m, 'attn_drop', None), float):  # mmpretrain
            m.attn_drop = attention
    return backbone


def attention_branch_keeps(backbone, events, attentions=()):
    """Hooks that append ``None`` when an attention (of :data:`ATTENTIONS`
    or ``attentions``) starts and ``(B,)`` bool, the samples a drop-path
    kept, at each drop-path call."""
    kinds = ATTENTIONS + tuple(attentions)
    return [m.register_forward_pre_hook(lambda m, a: events.append(None))
            if isinstance(m, kinds) else m.register_forward_hook(
                lambda m, a, out: events.append(out.flatten(1).ne(0).any(1)))
            for m in backbone.modules()
            if isinstance(m, kinds) or 'DropPath' in type(m).__name__]


BERNOULLI = 'ViT, torch.bernoulli drop-path'


@pytest.mark.parametrize('name,follow', [
    (name, True) for name in NAMES + [BERNOULLI]] + [
    (name, False) for name in NAMES[:1] + NAMES[6:7]])  # ViT, Swin V2
def test_training_labels_follow_the_forward_that_ran(name, follow):
    backbone, side = build(name if name in NAMES else NAMES[0])
    facts = CASES[name if name in NAMES else NAMES[0]].facts
    for layer in backbone.layers if name == BERNOULLI else []:
        layer.attn.out_drop = BernoulliDropPath()
    with_dropouts(backbone).train()
    images, pw, targets = random_mix(6, 2, side, side)

    def loss_and_grads(fn):
        torch.manual_seed(5)
        leaves = torch.utils._pytree.tree_leaves(fn())
        sum(leaf.float().square().sum() for leaf in leaves).backward()
        grads = [p.grad.clone() for p in backbone.parameters()
                 if p.grad is not None]
        backbone.zero_grad(set_to_none=True)
        return [leaf.detach() for leaf in leaves] + grads

    plain = loss_and_grads(lambda: backbone(images))
    events = []
    # (the backbone is this test's)
    attention_branch_keeps(backbone, events, facts.attentions)
    with attention_calls(backbone, *facts.attentions) as calls:
        aligned = []
        recorded = loss_and_grads(lambda: aligned.append(aligned_forward(
            backbone, images, pw, options=dict(follow_drop_path=follow),
            keep_history=True)) or aligned[0].feats)
    aligned = aligned[0]
    # The recorded forward is the plain one: same draws, tokens, gradients.
    assert len(recorded) == len(plain)
    assert all(torch.equal(a, b) for a, b in zip(recorded, plain))
    # a block's keeps: its drop-path calls after its attention starts and
    # before the next one's, the attention branch's first (none: the block
    # has no drop-path); the first block's from the forward's start where
    # the family says those drop branches that move labels (TinyViT's MBConv
    # blocks run theirs before any attention; HiViT's MLP stem moves none)
    starts = [i for i, e in enumerate(events) if e is None] + [len(events)]
    begin = 0 if facts.keeps_before_attention else starts[0]
    keeps = [[k for k in events[a:b] if k is not None]
             for a, b in zip([begin] + starts[1:-1], starts[1:])]
    assert len(keeps) == len(calls)
    seen = torch.stack([k[0] for k in keeps if k])
    assert seen.any() and not seen.all()  # both cases occur
    with torch.no_grad():
        _, ref = dense_labels(backbone, calls, pw, targets, facts,
                              keeps=keeps if follow else None, check=False)
    assert_history_close(aligned.history, ref, targets)
    for labels in aligned.history + [aligned.weights]:
        assert_distributions(labels)
    if follow:  # a sample dropped by every branch that moves labels in a
        # block (its attention; PVT v2: and its ConvFFN) keeps them, exactly;
        # not checked where labels move without a drop-path (a token step,
        # a branch or attention with none)
        taps = [t for t in describe(backbone).taps if not (
            t.kind.endswith('keep') and isinstance(t.module, nn.Identity))]
        kinds = [[t.kind for t in taps if t.block == i] for i in range(
            len(keeps))]
        branches = {i for i, k in enumerate(kinds) if 'branch' in k}
        for i, keep in enumerate(keeps):
            before, after = aligned.history[i], aligned.history[i + 1]
            if 'step' in kinds[i] or 'keep' not in kinds[i] or kinds[
                    i].count('branch') > kinds[i].count('branch_keep'):
                continue
            if keep and before.shape == after.shape:
                moved = keep[0] | keep[1] if i in branches else keep[0]
                assert torch.equal(after[~moved], before[~moved])


aligned_module = sys.modules['tlalign_mm.models.aligned_forward']
leaves = torch.utils._pytree.tree_leaves


def recorded_tensors(backbone, images, pw, monkeypatch):
    """Every tensor in the slots ``align`` receives, in order."""
    seen, align = [], aligned_module.align

    def spy(recorded, *args, **kwargs):
        seen.extend(t for slot in recorded.slots for t in vars(slot).values()
                    if isinstance(t, torch.Tensor))
        return align(recorded, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(aligned_module, 'align', spy)
        aligned_forward(backbone, images, pw)
    return seen


class Recorded(NamedTuple):
    """A plain backbone (of ``CASES[name]``), a deep copy with a recording
    kept on (as the classifier keeps one), and a random mix of its size."""
    name: str
    plain: nn.Module
    built: nn.Module
    recording: Recording
    side: int
    images: torch.Tensor
    pixel_weights: torch.Tensor
    targets: torch.Tensor


@pytest.fixture(params=NAMES)
def recorded(request):
    plain, side = build(request.param)
    built = copy.deepcopy(plain)
    return Recorded(request.param, plain, built, Recording(built), side,
                    *random_mix(2, 2, side, side))


def test_recorded_backbone_keeps_its_class_and_state_dict(recorded):
    plain, built = recorded.plain, recorded.built
    assert type(built) is type(plain)
    state, reference = built.state_dict(), plain.state_dict()
    assert list(state) == list(reference)
    assert state._metadata == reference._metadata


def test_a_plain_checkpoint_loads_both_ways(recorded):
    """Strictly (torch's strict=True would refuse Swin V2's own
    checkpoint: its load hook drops two buffers it rebuilds; see
    load_strictly), holding all the state (SPT, LSA temperatures...): a
    model of other weights loads it and computes the same."""
    plain, built = recorded.plain, recorded.built
    fresh, _ = build(recorded.name, seed=1)
    assert load_strictly(fresh, built.state_dict(), 'built') == ([], [], [])
    assert load_strictly(built, plain.state_dict(), 'plain') == ([], [], [])
    fresh.eval()  # (LeViT's, TinyViT's attention caches its bias in eval)
    for ours, theirs in zip(leaves(fresh(recorded.images)),
                            leaves(plain(recorded.images))):
        assert torch.equal(ours, theirs)


def test_recorded_forward_is_bit_identical_to_the_plain_one(recorded):
    for ours, theirs in zip(leaves(recorded.built(recorded.images)),
                            leaves(recorded.plain(recorded.images))):
        assert torch.equal(ours, theirs)


def test_the_kept_recording_aligns_as_a_one_call_recording(recorded):
    images, pw, targets = recorded[5:]
    assert torch.equal(
        aligned_forward(recorded.built, images, pw,
                        recording=recorded.recording).expand(targets),
        align_labels(recorded.plain, images, pw, targets))


def test_records_hold_no_labels(recorded, monkeypatch):
    """All-zero pixel weights record the same tensors."""
    images, pw = recorded.images, recorded.pixel_weights
    ours = recorded_tensors(recorded.plain, images, pw, monkeypatch)
    zeros = recorded_tensors(recorded.plain, images, torch.zeros_like(pw),
                             monkeypatch)
    assert len(ours) == len(zeros) > 0
    assert all(torch.equal(a, b) for a, b in zip(ours, zeros))


def test_records_are_detached(recorded, monkeypatch):
    """Taken in a forward that builds a graph, no record requires grad."""
    images = recorded.images.clone().requires_grad_()
    assert all(not t.requires_grad for t in recorded_tensors(
        recorded.plain, images, recorded.pixel_weights, monkeypatch))


def test_mixup_is_left_unchanged(recorded):
    """The same mix at every pixel: every token's label and the final one
    are the mix, to a few float32 ulps of the order-1 labels."""
    side, targets = recorded.side, recorded.targets
    weights = torch.tensor([[0.3, 0.7], [0.9, 0.1]])
    labels, history = align_labels(
        recorded.plain, recorded.images,
        weights[:, :, None, None].expand(2, 2, side, side), targets,
        return_token_labels=True)
    for tokens in history + [labels]:  # [0, 1], float32: 1e-6 = 8 ulp of 1
        torch.testing.assert_close(tokens, weights[:, None].expand_as(
            tokens) if tokens.dim() == 3 else torch.einsum(
            'bs,bsc->bc', weights, targets), atol=1e-6, rtol=0)


def test_a_deep_copy_aligns_on_its_own(recorded):
    """A deep copy (EMA) of the recorded backbone: its labels follow its
    own weights, and the original's stay its own."""
    built, images, pw, targets = recorded.built, *recorded[5:]
    ema = copy.deepcopy(built)

    def last(model):
        return align_labels(model, images, pw, targets, align_layers='last')

    ours = last(built)
    assert torch.equal(last(ema), ours)
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(1.5)
    assert (last(ema) - ours).abs().max() > 1e-4
    assert torch.equal(last(built), ours)


def test_two_backbones_in_two_threads_get_their_own_labels():
    """Both forwards are inside their blocks at the same time (a barrier in
    the first block of each); each gets the labels it gets alone."""
    (first, side), (second, _) = build(NAMES[0]), build(NAMES[5])
    runs = [(first, random_mix(2, 2, side, side, seed=1)[:2]),
            (second, random_mix(2, 3, 70, 70, seed=2)[:2])]

    def labels(run):
        return aligned_forward(run[0], *run[1]).weights

    alone = [labels(run) for run in runs]
    barrier = threading.Barrier(2, timeout=60)
    for backbone, _ in runs:
        describe(backbone).blocks[0].register_forward_pre_hook(
            lambda m, a: (barrier.wait(), None)[1])
    with ThreadPoolExecutor(2) as pool:  # (a thread's error is raised)
        together = list(pool.map(labels, runs))
    assert all(torch.equal(a, b) for a, b in zip(together, alone))


# -- a family the package does not name ----------------------------------
class ToyAttention(nn.Module):
    """Attention that computes its softmax through ``self.softmax``."""

    def __init__(self, dim=32, heads=2):
        super().__init__()
        self.num_heads, self.softmax = heads, nn.Softmax(-1)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.num_heads,
                                   -1).permute(2, 0, 3, 1, 4)
        attn = self.softmax(q @ k.transpose(-2, -1) * (C // 2)**-.5)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class ToyBlock(nn.Module):

    def __init__(self, dim=32):
        super().__init__()
        self.attn, self.drop_path = ToyAttention(dim), DropPath(0.1)

    def forward(self, x):
        return x + self.drop_path(self.attn(x))


class ToyViT(nn.Module):
    """Patch tokens (no class token), toy attention, mean readout."""

    num_extra_tokens, out_type = 0, 'avg_featmap'

    def __init__(self, dim=32, depth=2, patch=8):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels=3, embed_dims=dim,
                                      kernel_size=patch, stride=patch)
        self.blocks = nn.Sequential(*(ToyBlock(dim) for _ in range(depth)))

    def forward(self, x):
        return (self.blocks(self.patch_embed(x)[0]).mean(1), )


def test_the_design_doc_family_matches_the_dense_reference(monkeypatch):
    """The first Python block of docs/design.md's "Adding a family": it
    registers the family by decorator (here moved from its key to this
    module's ToyAttention, for this test only)."""
    root = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
    with open(osp.join(root, 'docs', 'design.md')) as f:
        text = f.read().split('### Adding a family', 1)[1]
    namespace = {}
    exec(re.search(r'```python\n(.*?)```', text, re.S).group(1), namespace)
    family = FAMILIES.module_dict.pop('my_package.ToyAttention')
    assert family is namespace['describe_toy_vit']
    monkeypatch.setitem(FAMILIES.module_dict, f'{__name__}.ToyAttention',
                        family)
    backbone = zoo.randomise(ToyViT()).eval()
    images, pw, targets = random_mix(2, 2, 32, 32, box=(3, 21, 5, 30))
    aligned = aligned_forward(backbone, images, pw, keep_history=True)
    # the family's facts for the reference, each stated (the defaults
    # would read these off the toy too)
    ref, ref_history = dense_reference(backbone, images, pw, targets, Facts(
        attentions=(ToyAttention, ), attention=token_attention,
        embed=lambda pixel_labels: patch_means(pixel_labels, 8), prefix=0,
        readout=lambda labels: labels.mean(1)))
    assert_history_close(aligned.history, ref_history, targets)
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    assert (ref_history[-1] - ref_history[0]).abs().max() > 1e-2
