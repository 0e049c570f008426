"""What every supported backbone must satisfy, one suite for all of them.

Per-architecture exactness against dense references lives in
``test_{vit,swin,pvt,beit}_alignment.py`` and ``test_spt_lsa.py``; here:

- labels are float32 distributions after every block, in eval and in
  training with drop-path and attention dropout;
- MixUp (the same mix at every pixel) is left unchanged by alignment;
- with attention that moves nothing (``A = I``), no block moves a label;
- a recorded backbone is the plain one: same class, bit-identical
  evaluation, a plain checkpoint both ways;
- a deep copy (EMA) aligns on its own;
- a backbone the package does not name, assembled from supported modules
  (mmpretrain's ``DeiT3``, and a ViT-like class defined here that does not
  subclass ``VisionTransformer``), is aligned exactly with no description
  of its own.
"""
import copy

import pytest
import torch
import torch.nn as nn
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.model import BaseModule, ModuleList
from mmpretrain.models.backbones.vision_transformer import (
    TransformerEncoderLayer,
)
from mmpretrain.registry import MODELS

import tlalign_mm.core.records
from tlalign_mm import align_labels
from tlalign_mm.checkpoint import load_strictly
from tlalign_mm.models import Recording, aligned_forward, describe

from . import test_beit_alignment as beit_tests
from . import test_pvt_alignment as pvt_tests
from . import test_spt_lsa as sl_tests
from . import test_swin_alignment as swin_tests
from . import test_swin_v2_alignment as swin_v2_tests
from . import test_timm_alignment as timm_tests
from . import test_vit_alignment as vit_tests
from .mixes import identity_attention, random_mix
from .test_training_path import explicit_attention


@MODELS.register_module(force=True)
class TinyViTLike(BaseModule):
    """A ViT the package knows nothing about: not a ``VisionTransformer``
    subclass, only built from an mmcv ``PatchEmbed`` and mmpretrain
    ``TransformerEncoderLayer``s (``MultiheadAttention``), with a class
    token and the attributes a readout needs (``out_type``,
    ``num_extra_tokens``)."""

    out_type = 'cls_token'
    num_extra_tokens = 1

    def __init__(self, embed_dims=32, num_layers=2, num_heads=2, patch=8):
        super().__init__()
        self.patch_embed = PatchEmbed(in_channels=3, embed_dims=embed_dims,
                                      kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dims))
        self.layers = ModuleList([
            TransformerEncoderLayer(embed_dims, num_heads, 2 * embed_dims)
            for _ in range(num_layers)
        ])

    def forward(self, x):
        x, _ = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        for layer in self.layers:
            x = layer(x)
        return (x[:, 0], )


def sharpened(model, factor=4.0):
    for m in model.modules():
        if hasattr(m, 'qkv') and hasattr(m, 'head_dims'):
            with torch.no_grad():
                m.qkv.weight[:2 * m.embed_dims] *= factor
    model.eval()  # some mmpretrain backbones' train() returns None
    return model


def build_deit3():
    torch.manual_seed(0)
    return sharpened(
        MODELS.build(
            dict(type='DeiT3', arch=dict(embed_dims=32, num_layers=2,
                                         num_heads=2,
                                         feedforward_channels=64),
                 img_size=32, patch_size=8)))


def build_vit_like():
    torch.manual_seed(0)
    return sharpened(TinyViTLike())


def build_timm(model_name, **kwargs):
    """A tiny timm ViT with drop-path modules (inactive in eval)."""
    return timm_tests.build(model_name, img_size=32, patch_size=8,
                            embed_dim=32, depth=2, num_heads=2,
                            drop_path_rate=0.1, **kwargs)


# name: (plain backbone config builder, input side)
BACKBONES = {
    'ViT': (lambda: vit_tests.build_vit(), 32),
    'ViT pooled, no class token': (lambda: vit_tests.build_vit(
        out_type='avg_featmap', with_cls_token=False), 36),
    'distilled DeiT': (
        lambda: vit_tests.build_vit(type='DistilledVisionTransformer'), 32),
    'DeiT3 (not named by the package)': (build_deit3, 32),
    'ViT-like class (not named by the package)': (build_vit_like, 32),
    'Swin, padded': (lambda: swin_tests.build_swin(
        swin_tests.ARCH3, pad_small_map=True), 70),
    'Swin V2, padded': (lambda: swin_v2_tests.build_swin_v2(
        swin_v2_tests.ARCH3, window_size=8, pad_small_map=True), 70),
    'PVT v1': (lambda: pvt_tests.build_pvt(version=1), 70),
    'PVT v2': (lambda: pvt_tests.build_pvt(version=2), 70),
    'SL-ViT': (lambda: sl_tests.build_vit(), 30),
    'SL-Swin': (lambda: sl_tests.build_swin(), 32),
    # timm, through mmpretrain's TIMMBackbone (PooledTIMMBackbone)
    'timm DeiT': (lambda: build_timm('deit_tiny_patch16_224'), 32),
    'timm ViT pooled, registers, explicit attention': (lambda: build_timm(
        'vit_small_patch16_224', fused=False, global_pool='avg',
        reg_tokens=2), 32),
    'timm distilled DeiT': (
        lambda: build_timm('deit_tiny_distilled_patch16_224'), 32),
    'BEiT, pooled': (lambda: beit_tests.build_beit(drop_path_rate=0.1), 32),
    'BEiT, shared bias, cls': (lambda: beit_tests.build_beit(
        drop_path_rate=0.1, out_type='cls_token', use_rel_pos_bias=False,
        use_shared_rel_pos_bias=True), 32),
}
NAMES = list(BACKBONES)


def build(name):
    make, side = BACKBONES[name]
    return make(), side


def check_distributions(labels):
    assert labels.dtype == torch.float32
    assert (labels >= 0).all()
    torch.testing.assert_close(labels.sum(-1), torch.ones(labels.shape[:-1]),
                               atol=1e-6, rtol=0)


@pytest.mark.parametrize('S', [1, 2, 3])
@pytest.mark.parametrize('name', NAMES)
def test_labels_are_distributions_after_every_block(name, S):
    backbone, side = build(name)
    images, pw, _ = random_mix(2, S, side, side)
    aligned = aligned_forward(backbone, images, pw, keep_history=True)
    assert len(aligned.history) == len(describe(backbone).blocks) + 1
    for labels in aligned.history + [aligned.weights]:
        check_distributions(labels)


def tap_kinds(backbone):
    return {tap.kind for tap in describe(backbone).taps}


def set_drop_paths(backbone, drop_path):
    """The attention branch's drop-path rate in every block."""
    for tap in describe(backbone).taps:
        if tap.kind == 'keep':
            tap.module.drop_prob = drop_path


def set_dropouts(backbone, drop_path=0.5, attention=0.2):
    """Drop-path on every attention branch and dropout on every attention
    matrix (each family keeps the latter in its own attribute)."""
    set_drop_paths(backbone, drop_path)
    for block in describe(backbone).blocks:
        attn = block.attn
        if hasattr(attn, 'w_msa'):  # Swin: nn.Dropout on the softmax
            attn.w_msa.attn_drop.p = attention
        elif isinstance(getattr(attn, 'attn', None), nn.MultiheadAttention):
            attn.attn.dropout = attention  # PVT
        elif isinstance(getattr(attn, 'attn_drop', None), nn.Dropout):
            attn.attn_drop.p = attention  # timm, BEiT
        else:
            attn.attn_drop = attention  # mmpretrain MultiheadAttention


@pytest.mark.parametrize('name', NAMES)
def test_labels_are_distributions_in_training_with_dropouts(name):
    backbone, side = build(name)
    set_dropouts(backbone)
    backbone.train()
    images, pw, _ = random_mix(4, 2, side, side)
    torch.manual_seed(0)
    aligned = aligned_forward(backbone, images, pw, keep_history=True)
    for labels in aligned.history + [aligned.weights]:
        check_distributions(labels)
    for feats in torch.utils._pytree.tree_leaves(aligned.feats):
        assert torch.isfinite(feats).all()


@pytest.mark.parametrize('name', NAMES)
def test_mixup_is_unchanged(name):
    backbone, side = build(name)
    images, _, targets = random_mix(3, 2, side, side)
    lam = torch.tensor([0.3, 0.9, 0.1])
    weights = torch.stack([lam, 1 - lam], 1)
    pw = weights[:, :, None, None].expand(3, 2, side, side)
    labels, history = align_labels(backbone, images, pw, targets,
                                   return_token_labels=True)
    for tokens in history:
        torch.testing.assert_close(tokens, weights[:, None].expand_as(tokens),
                                   atol=1e-6, rtol=0)
    torch.testing.assert_close(
        labels, torch.einsum('bs,bsc->bc', weights, targets), atol=1e-6,
        rtol=0)


class EyeSoftmax(nn.Softmax):
    """Window attention that moves nothing: ``A = I``."""

    def forward(self, x):
        return torch.eye(x.shape[-1]).expand_as(x)


def eye_softmax(module, args):
    """timm's explicit path and BEiT: ``attn_drop`` gets ``A = I``."""
    attn = args[0]
    return (torch.eye(attn.shape[-1]).expand_as(attn), )


def make_attention_identity(backbone, monkeypatch):
    """``A = I`` in every block, where the family's attention allows it
    (PVT's reduced keys do not: it has no identity attention). The ViT
    families' labels follow the recorded q and k, so there ``A = I`` is the
    labels' attention (and timm's explicit path also the tokens')."""
    kinds = tap_kinds(backbone)
    if kinds & {'qkv', 'q_norm'}:
        monkeypatch.setattr(tlalign_mm.core.records, 'head_mean_attention',
                            identity_attention)
    for block in describe(backbone).blocks:
        attn = block.attn
        if 'q_norm' in kinds:  # timm
            attn.fused_attn = False
            attn.attn_drop.register_forward_pre_hook(eye_softmax)
        elif 'attn_drop_input' in kinds:  # BEiT
            attn.attn_drop.register_forward_pre_hook(eye_softmax)
        elif 'qkv' in kinds:
            pass
        elif hasattr(attn, 'w_msa'):
            attn.w_msa.softmax = EyeSoftmax(dim=-1)
        else:
            pytest.skip('spatial-reduction attention has no identity')


@pytest.mark.parametrize('name', NAMES)
def test_identity_attention_moves_no_label(name, monkeypatch):
    backbone, side = build(name)
    make_attention_identity(backbone, monkeypatch)
    images, pw, _ = random_mix(2, 2, side, side, box=(3, 21, 5, 19))
    aligned = aligned_forward(backbone, images, pw, keep_history=True)
    monkeypatch.undo()
    moved_by_merging = 0
    for before, after in zip(aligned.history, aligned.history[1:]):
        if before.shape == after.shape:  # no merging in between
            torch.testing.assert_close(after, before, atol=1e-6, rtol=0)
        else:
            moved_by_merging += 1
    # ... and with the real attention, blocks do move labels.
    real, _ = build(name)
    moved = aligned_forward(real, images, pw, keep_history=True).history
    assert max((a - b).abs().max() for a, b in zip(moved, moved[1:])
               if a.shape == b.shape) > 1e-3


@pytest.mark.parametrize('name', NAMES)
def test_recorded_backbone_is_the_plain_one(name):
    plain, side = build(name)
    built = copy.deepcopy(plain)
    recording = Recording(built)  # its taps stay on, as the classifier's
    assert type(built) is type(plain)
    state, reference = built.state_dict(), plain.state_dict()
    assert list(state) == list(reference)
    assert state._metadata == reference._metadata
    # Strictly (torch's strict=True would refuse Swin V2's own checkpoint:
    # its load hook drops two buffers it rebuilds; see load_strictly).
    assert load_strictly(plain, state, 'built') == ([], [], [])
    assert load_strictly(built, reference, 'plain') == ([], [], [])
    x = torch.randn(2, 3, side, side)
    leaves = torch.utils._pytree.tree_leaves
    for ours, theirs in zip(leaves(built(x)), leaves(plain(x))):
        assert torch.equal(ours, theirs)
    # The same labels as recording the plain backbone for one call.
    images, pw, targets = random_mix(2, 2, side, side)
    torch.testing.assert_close(
        aligned_forward(built, images, pw,
                        recording=recording).expand(targets),
        align_labels(plain, images, pw, targets), atol=0, rtol=0)


@pytest.mark.parametrize('name', ['ViT', 'Swin, padded', 'Swin V2, padded',
                                  'PVT v2', 'timm DeiT', 'BEiT, pooled'])
def test_a_deep_copy_aligns_on_its_own(name):
    built, side = build(name)
    ema = copy.deepcopy(built)
    images, pw, targets = random_mix(2, 2, side, side)
    ours = align_labels(ema, images, pw, targets, align_layers='last')
    torch.testing.assert_close(
        ours, align_labels(built, images, pw, targets, align_layers='last'),
        atol=0, rtol=0)
    # The copy's labels are the copy's: changing its weights changes its
    # labels only.
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(1.5)
    assert (align_labels(ema, images, pw, targets, align_layers='last') -
            ours).abs().max() > 1e-4
    torch.testing.assert_close(
        align_labels(built, images, pw, targets, align_layers='last'), ours,
        atol=0, rtol=0)


@pytest.mark.parametrize('name', ['DeiT3 (not named by the package)',
                                  'ViT-like class (not named by the package)'])
def test_unnamed_vit_like_backbone_matches_dense_attention(name):
    """The labels equal explicit head-averaged attention applied to the
    labels block by block, with each block's input read off a plain
    forward."""
    backbone, side = build(name)
    assert tap_kinds(backbone) == {'qkv', 'keep'}
    images, pw, targets = random_mix(2, 2, side, side, box=(3, 21, 5, 30))
    inputs = []
    handles = [
        layer.attn.register_forward_hook(
            lambda m, args, out: inputs.append(args[0]))
        for layer in backbone.layers
    ]
    with torch.no_grad():
        backbone(images)
    for h in handles:
        h.remove()
    patches = pw.reshape(2, 2, side // 8, 8, side // 8, 8).mean((3, 5))
    Y = torch.cat([pw.mean((2, 3))[:, None],
                   patches.flatten(2).transpose(1, 2)], 1).double()
    expected = [Y]
    for layer, x in zip(backbone.layers, inputs):
        with torch.no_grad():
            A, _ = explicit_attention(layer.attn, x)
        Y = (Y + A.mean(1).double() @ Y) / 2
        expected.append(Y)
    _, history = align_labels(backbone, images, pw, targets,
                              return_token_labels=True)
    for ours, theirs in zip(history, expected):
        assert (ours.double() - theirs).abs().max() <= 1e-5
    assert (expected[-1][:, 0] - expected[0][:, 0]).abs().max() > 1e-3
