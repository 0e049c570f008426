"""SPT and LSA (Lee et al. 2021) as mmpretrain components, SL-ViT and
SL-Swin, TL-Align through them against an independent dense reference, and
their configs."""
import copy
import glob
import io
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmpretrain.models.utils import MultiheadAttention
from mmpretrain.registry import DATASETS, MODELS

import tlalign_mm  # noqa: F401  (registration)
from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward, describe
from tlalign_mm.models.spt_lsa import (
    LocalitySelfAttention,
    LocalityWindowMSA,
    ShiftedPatchTokenization,
    spt_token_labels,
)

from .dense_reference_spt_lsa import (
    brute_force_spt_labels,
    brute_force_spt_tokens,
    brute_force_tokens_of_map,
    dense_sl_swin_labels,
    dense_sl_vit_labels,
    patch_mean_labels,
    pixel_labels,
)
from .mixes import (
    assert_history_close,
    history_in_classes,
    in_classes,
    random_mix,
)

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
VIT_ARCH = dict(embed_dims=48, num_layers=3, num_heads=3,
                feedforward_channels=96)
SWIN_ARCH = dict(embed_dims=24, depths=[2, 2, 2], num_heads=[2, 2, 4])


@pytest.fixture(autouse=True, scope='module')
def one_thread():
    """These models are tiny: one intra-op thread is faster than several
    (and far faster on a shared, busy machine); restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def randomise(model, seed, sharpen=4.0):
    """Random non-trivial weights: LayerNorm affine, LSA scales, position
    embeddings, relative position bias; sharpened q/k so attention moves
    labels."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('scale'):  # LSA: per-head, around head_dim^-.5
                p.mul_(torch.rand(p.shape, generator=g) + 0.5)
            elif 'norm' in name or 'ln' in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
            elif name.endswith(('pos_embed', 'cls_token',
                                'relative_position_bias_table')):
                p.normal_(0, 0.5, generator=g)
        for m in model.modules():
            if isinstance(m, (MultiheadAttention, LocalityWindowMSA)) or \
                    type(m).__name__ == 'WindowMSA':
                dims = m.embed_dims
                m.qkv.weight[:2 * dims] *= sharpen
    return model


def build_vit(seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(type='SLViT', arch=VIT_ARCH, img_size=32, patch_size=4)
    cfg.update(kwargs)
    vit = MODELS.build(cfg)
    randomise(vit, seed)
    vit.eval()  # mmpretrain backbones' train() returns None
    return vit


def build_swin(seed=0, **kwargs):
    torch.manual_seed(seed)
    cfg = dict(type='SLSwin', arch=SWIN_ARCH, img_size=32, drop_path_rate=0.)
    cfg.update(kwargs)
    swin = MODELS.build(cfg)
    randomise(swin, seed)
    swin.eval()
    return swin


def source_space(B, S):
    """Identity targets: class-space labels are then the source weights, so
    the reference is compared with the recorded labels as they are."""
    return torch.eye(S).expand(B, S, S)


# --------------------------------------------------------------------- SPT


def build_spt(seed=0, **kwargs):
    torch.manual_seed(seed)
    spt = ShiftedPatchTokenization(**kwargs)
    return randomise(spt, seed)


def test_spt_shapes_as_patch_embed_and_as_pooling():
    spt = ShiftedPatchTokenization(in_channels=3, embed_dims=32,
                                   patch_size=4, input_size=32)
    assert spt.init_out_size == (8, 8) and spt.out_channels == 32
    assert spt.shift_size == (2, 2) and spt.patch_dim == 5 * 3 * 16
    tokens, hw = spt(torch.randn(2, 3, 32, 32))
    assert tokens.shape == (2, 64, 32) and hw == (8, 8)
    tokens, hw = spt(torch.randn(2, 3, 30, 27))  # corner padding
    assert tokens.shape == (2, 8 * 7, 32) and hw == (8, 7)
    assert spt.output_size((30, 27)) == (8, 7)

    pool = ShiftedPatchTokenization(in_channels=16, out_channels=32)
    assert pool.patch_size == (2, 2) and pool.shift_size == (1, 1)
    out, hw = pool(torch.randn(2, 15 * 9, 16), (15, 9))
    assert out.shape == (2, 8 * 5, 32) and hw == (8, 5)
    with pytest.raises(ValueError, match='input_size'):
        pool(torch.randn(2, 16, 16))


@pytest.mark.parametrize('patch,size', [(4, (32, 32)), (4, (30, 27)),
                                        (3, (13, 11)), (8, (64, 64))])
def test_spt_tokens_equal_brute_force(patch, size):
    spt = build_spt(in_channels=3, embed_dims=24, patch_size=patch)
    x = torch.randn(2, 3, *size)
    tokens, hw = spt(x)
    ref, ref_hw = brute_force_spt_tokens(spt, x)
    assert hw == ref_hw
    assert (tokens.double() - ref).abs().max() <= 1e-5
    # Not the same as an unshifted patchify: the shift is tested.
    plain = ShiftedPatchTokenization(in_channels=3, embed_dims=24,
                                     patch_size=patch, shift_size=0)
    plain.load_state_dict(spt.state_dict())
    assert (plain(x)[0] - tokens).abs().max() > 1e-2


def test_spt_pooling_equals_brute_force():
    pool = build_spt(in_channels=8, out_channels=16, patch_size=2)
    x = torch.randn(2, 7 * 9, 8)
    out, hw = pool(x, (7, 9))
    ref, ref_hw = brute_force_tokens_of_map(pool, x, (7, 9))
    assert hw == ref_hw == (4, 5)
    assert (out.double() - ref).abs().max() <= 1e-5


@pytest.mark.parametrize('patch,size', [(4, (32, 32)), (4, (30, 27)),
                                        (2, (15, 9)), (3, (13, 11))])
def test_spt_labels_equal_per_pixel_brute_force(patch, size):
    spt = ShiftedPatchTokenization(in_channels=3, embed_dims=8,
                                   patch_size=patch)
    _, pw, targets = random_mix(2, 3, *size)
    ours = in_classes(spt_token_labels(spt, pw), targets)
    ref = brute_force_spt_labels(pixel_labels(pw, targets), patch,
                                 patch // 2)
    assert (ours - ref).abs().max() <= 1e-6
    # The shifted views count: plain patch means differ.
    plain = patch_mean_labels(pixel_labels(pw, targets), patch)
    assert (ref - plain).abs().max() > 1e-3


@pytest.mark.parametrize('patch,size', [(4, (32, 32)), (4, (30, 27)),
                                        (3, (13, 11))])
def test_spt_centre_labels_are_the_own_patch_means(patch, size):
    """``label_views='centre'``: each token's label is its own patch's mean
    over real positions (the dense reference of a plain patch embedding),
    not the five views' (so the option is what is tested)."""
    spt = ShiftedPatchTokenization(in_channels=3, embed_dims=8,
                                   patch_size=patch, label_views='centre')
    _, pw, targets = random_mix(2, 3, *size)
    ours = in_classes(spt_token_labels(spt, pw), targets)
    ref = patch_mean_labels(pixel_labels(pw, targets), patch)
    assert (ours - ref).abs().max() <= 1e-6
    five = brute_force_spt_labels(pixel_labels(pw, targets), patch,
                                  patch // 2)
    assert (ours - five).abs().max() > 1e-3
    with pytest.raises(ValueError, match='label_views must be one of'):
        ShiftedPatchTokenization(embed_dims=8, label_views='center')


@pytest.mark.parametrize('out_type', ['cls_token', 'avg_featmap'])
def test_sl_vit_centre_labels_match_dense_reference(out_type):
    """SL-ViT with ``spt_cfg=dict(label_views='centre')``: the aligned
    labels equal the dense reference started from own-patch labels, differ
    from the five-view rule's, and moved away from the area target; the
    tokens, and so the model, are the five-view model's."""
    vit = build_vit(out_type=out_type, spt_cfg=dict(label_views='centre'))
    five = build_vit(out_type=out_type)
    images, pw, _ = random_mix(2, 2, 32, 32, box=(5, 23, 3, 18))
    sources = source_space(2, 2)  # class-space labels = source weights
    ref, _, _ = dense_sl_vit_labels(vit, images, pw, sources,
                                    pw.mean((2, 3)), spt_centre_labels=True)
    labels = align_labels(vit, images, pw, sources).double()
    torch.testing.assert_close(labels, ref, atol=1e-5, rtol=0)
    assert (labels - align_labels(five, images, pw, sources)).abs().max() \
        > 1e-3
    assert (labels - pw.mean((2, 3))).abs().max() > 1e-2
    assert torch.equal(vit(images)[-1], five(images)[-1])


# --------------------------------------------------------------------- LSA


def record_attention(module):
    """Wrap ``module.scaled_dot_product_attention`` to also record the
    attention matrix it applies (its output with identity values)."""
    original = module.scaled_dot_product_attention
    seen = []

    def recording(q, k, v, attn_mask=None, dropout_p=0., **kwargs):
        eye = torch.eye(k.shape[-2]).expand(*k.shape[:2], -1, -1)
        seen.append(original(q, k, eye, attn_mask=attn_mask, **kwargs))
        return original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                        **kwargs)

    module.scaled_dot_product_attention = recording
    return seen


def test_lsa_excludes_the_diagonal_exactly():
    torch.manual_seed(0)
    lsa = randomise(LocalitySelfAttention(embed_dims=24, num_heads=3), 0)
    seen = record_attention(lsa)
    x = torch.randn(2, 17, 24)  # a class token and 16 patches
    lsa(x)
    A = seen[0]
    assert torch.equal(torch.diagonal(A, dim1=-2, dim2=-1),
                       torch.zeros(2, 3, 17))
    torch.testing.assert_close(A.sum(-1), torch.ones(2, 3, 17), atol=1e-6,
                               rtol=0)
    # and it is softmax(scale_h q.k) over the other tokens
    q, k, _ = lsa.qkv(x).reshape(2, 17, 3, 3, 8).permute(2, 0, 3, 1, 4)
    logits = (q @ k.transpose(-2, -1)) * lsa.scale.view(1, 3, 1, 1)
    eye = torch.eye(17, dtype=torch.bool)
    ref = logits.masked_fill(eye, float('-inf')).softmax(-1)
    torch.testing.assert_close(A, ref, atol=1e-6, rtol=0)


def test_window_lsa_excludes_the_diagonal_exactly():
    torch.manual_seed(0)
    w_msa = randomise(
        LocalityWindowMSA(embed_dims=16, window_size=(4, 4), num_heads=2), 0)
    seen = []
    w_msa.softmax.register_forward_hook(lambda m, i, o: seen.append(o))
    mask = torch.zeros(2, 16, 16)
    mask[1, :8, 8:] = mask[1, 8:, :8] = -100.  # a shift mask
    w_msa(torch.randn(4, 16, 16), mask=mask)
    A = seen[0]
    assert torch.equal(torch.diagonal(A, dim1=-2, dim2=-1),
                       torch.zeros(4, 2, 16))
    torch.testing.assert_close(A.sum(-1), torch.ones(4, 2, 16), atol=1e-6,
                               rtol=0)


@pytest.mark.parametrize('cls', [LocalitySelfAttention, LocalityWindowMSA])
def test_temperature_is_a_trained_parameter(cls):
    torch.manual_seed(0)
    if cls is LocalitySelfAttention:
        module, x = cls(embed_dims=24, num_heads=3), torch.randn(2, 9, 24)
    else:
        module = cls(embed_dims=24, window_size=(3, 3), num_heads=3)
        x = torch.randn(2, 9, 24)
    state = module.state_dict()
    assert 'scale' in state and state['scale'].shape == (3, )
    torch.testing.assert_close(state['scale'], torch.full((3, ), 8**-0.5))
    assert any(p is module.scale for p in module.parameters())
    module(x).square().sum().backward()
    assert module.scale.grad is not None
    assert module.scale.grad.abs().min() > 0
    # A fixed temperature is neither a parameter nor in the checkpoint.
    fixed = cls(**({'embed_dims': 24, 'num_heads': 3} if cls is
                   LocalitySelfAttention else
                   {'embed_dims': 24, 'window_size': (3, 3),
                    'num_heads': 3}), learnable_temperature=False)
    assert 'scale' not in fixed.state_dict()
    assert not any(n == 'scale' for n, _ in fixed.named_parameters())


def test_lsa_starts_as_the_usual_scaling():
    """Without the diagonal mask, a fresh LSA is MultiheadAttention."""
    torch.manual_seed(0)
    mha = MultiheadAttention(embed_dims=24, num_heads=3)
    lsa = LocalitySelfAttention.from_multihead_attention(
        mha, diagonal_masking=False)
    x = torch.randn(2, 9, 24)
    torch.testing.assert_close(lsa(x), mha(x), atol=1e-6, rtol=0)
    masked = LocalitySelfAttention.from_multihead_attention(mha)
    assert (masked(x) - mha(x)).abs().max() > 1e-3


# ------------------------------------------------------------- backbones


def test_switches_swap_only_what_they_name():
    from mmcv.cnn.bricks.transformer import PatchEmbed, PatchMerging
    from mmpretrain.models.utils import WindowMSA
    for spt in (True, False):
        for lsa in (True, False):
            vit = MODELS.build(dict(type='SLViT', arch=VIT_ARCH,
                                    use_spt=spt, use_lsa=lsa))
            assert isinstance(vit.patch_embed, ShiftedPatchTokenization
                              if spt else PatchEmbed)
            assert all((type(layer.attn) is LocalitySelfAttention) == lsa
                       for layer in vit.layers)
            swin = MODELS.build(dict(type='SLSwin', arch=SWIN_ARCH,
                                     use_spt=spt, use_lsa=lsa))
            assert isinstance(swin.patch_embed, ShiftedPatchTokenization
                              if spt else PatchEmbed)
            assert all(
                isinstance(s.downsample, ShiftedPatchTokenization
                           if spt else PatchMerging)
                for s in swin.stages[:-1])
            assert all(
                type(b.attn.w_msa) is (LocalityWindowMSA if lsa else WindowMSA)
                for s in swin.stages for b in s.blocks)
            # No description of their own: the ViT/Swin ones, with SPT's
            # token rule and LSA as a MultiheadAttention/WindowMSA.
            assert {t.kind for t in describe(vit).taps} == {'qkv', 'keep'}
            assert 'windows' in {t.kind for t in describe(swin).taps}


def test_paper_archs():
    vit = MODELS.build(dict(type='SLViT'))
    assert (vit.embed_dims, len(vit.layers)) == (192, 9)
    attn = vit.layers[0].attn
    assert (attn.num_heads, attn.head_dims) == (12, 16)
    assert vit.layers[0].ffn.layers[0][0].out_features == 384
    assert vit.patch_resolution == (8, 8)
    tin = MODELS.build(dict(type='SLViT', img_size=64, patch_size=8))
    assert tin.patch_resolution == (8, 8)
    swin = MODELS.build(dict(type='SLSwin'))
    assert swin.embed_dims == 96 and swin.depths == [2, 6, 4]
    assert swin.num_heads == [3, 6, 12] and swin.out_indices == (2, )
    block = swin.stages[0].blocks[1]
    assert block.attn.window_size == 4 and block.attn.shift_size == 2
    assert block.ffn.layers[0][0].out_features == 192
    assert swin.patch_resolution == (16, 16)
    assert [s.out_channels for s in swin.stages] == [192, 384, 384]
    out = swin(torch.randn(1, 3, 32, 32))
    assert out[-1].shape == (1, 384, 4, 4)


# ------------------------------------------------------- TL-Align exactness

VIT_CASES = [
    dict(name='SPT+LSA cls S=2', S=2, size=(32, 32)),
    dict(name='SPT+LSA cls S=3', S=3, size=(32, 32)),
    dict(name='CutMix box', S=2, size=(32, 32), box=(5, 23, 3, 18)),
    dict(name='SPT+LSA pooled', S=2, size=(32, 32), out_type='avg_featmap'),
    dict(name='not a multiple of patch', S=3, size=(30, 27)),
    dict(name='SPT only', S=2, size=(32, 32), use_lsa=False),
    dict(name='LSA only', S=2, size=(32, 32), use_spt=False),
]


@pytest.mark.parametrize('case', VIT_CASES, ids=[c['name'] for c in VIT_CASES])
def test_sl_vit_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'),
                            case.pop('size'), case.pop('box', None))
    vit = build_vit(**case)
    images, pw, targets = random_mix(2, S, H, W, box=box)
    area_share = pw.mean((2, 3))
    aligned = aligned_forward(vit, images, pw, keep_history=True)
    ref, ref_history, ref_tokens = dense_sl_vit_labels(
        vit, images, pw, source_space(2, S), area_share)
    # The reference's own forward is the model's.
    if vit.out_type == 'cls_token':
        assert (aligned.feats[-1].double() -
                ref_tokens[:, 0]).abs().max() < 1e-4
    assert (aligned.weights.double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history, 4)
    # The alignment moved labels: the test can fail.
    assert (ref_history[-1] - ref_history[0]).abs().max() > 1e-2
    # and the public entry point, in class space, agrees
    labels = align_labels(vit, images, pw, targets)
    torch.testing.assert_close(labels.double(), in_classes(ref, targets),
                               atol=1e-5, rtol=0)


def test_lsa_masking_is_what_is_tested():
    """The reference without LSA's mask and temperature gives other token
    labels, far beyond the tolerance."""
    vit = build_vit()
    images, pw, _ = random_mix(2, 2, 32, 32)
    aligned = aligned_forward(vit, images, pw, keep_history=True)
    plain = build_vit()
    for layer in plain.layers:
        layer.attn.diagonal_masking = False
        with torch.no_grad():
            layer.attn.scale.fill_(layer.attn.head_dims**-0.5)
    _, other, _ = dense_sl_vit_labels(plain, images, pw, source_space(2, 2),
                                      pw.mean((2, 3)))
    assert max((a.double() - b).abs().max()
               for a, b in zip(aligned.history, other)) > 1e-2


SWIN_CASES = [
    dict(name='SPT+LSA S=2', S=2, size=(32, 32)),
    dict(name='SPT+LSA S=3', S=3, size=(32, 32)),
    dict(name='CutMix box', S=2, size=(32, 32), box=(3, 19, 9, 30)),
    # 15x15 tokens (windows padded to 16), SPT pooling pads 15 -> 16.
    dict(name='padding everywhere', S=2, size=(30, 30)),
    dict(name='SPT only', S=2, size=(32, 32), use_lsa=False),
    dict(name='LSA only', S=2, size=(32, 32), use_spt=False),
    dict(name='out after downsample', S=2, size=(32, 32), out_indices=(1, ),
         out_after_downsample=True),
]


@pytest.mark.parametrize('case', SWIN_CASES,
                         ids=[c['name'] for c in SWIN_CASES])
def test_sl_swin_matches_dense_reference(case):
    case = dict(case)
    _, S, (H, W), box = (case.pop('name'), case.pop('S'),
                            case.pop('size'), case.pop('box', None))
    swin = build_swin(**case)
    images, pw, targets = random_mix(2, S, H, W, box=box)
    aligned = aligned_forward(swin, images, pw, keep_history=True)
    ref, ref_history, ref_feat = dense_sl_swin_labels(
        swin, images, pw, source_space(2, S))
    assert (aligned.feats[-1].double() - ref_feat).abs().max() < 1e-4
    assert (aligned.weights.double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history, sum(swin.depths) + 1)
    assert (ref_history[1] - ref_history[0]).abs().max() > 1e-2
    torch.testing.assert_close(
        align_labels(swin, images, pw, targets).double(),
        in_classes(ref, targets), atol=1e-5, rtol=0)


def test_sl_swin_pooling_labels_are_the_shifted_windows():
    """With identity attention the labels only change at SPT pooling, to
    the brute-force mean over its five shifted windows."""
    swin = build_swin()
    for stage in swin.stages:
        for block in stage.blocks:
            block.attn.w_msa.softmax = EyeSoftmax(dim=-1)
    images, pw, targets = random_mix(2, 2, 32, 32, box=(5, 21, 9, 27))
    aligned = aligned_forward(swin, images, pw, keep_history=True)
    ours = history_in_classes(aligned.history, targets)
    initial = brute_force_spt_labels(pixel_labels(pw, targets), 2, 1)
    pooled = brute_force_spt_labels(
        initial.reshape(2, 16, 16, -1).permute(0, 3, 1, 2), 2, 1)
    for labels in ours[:3]:
        assert (labels - initial).abs().max() <= 1e-6
    for labels in ours[3:5]:
        assert (labels - pooled).abs().max() <= 1e-6
    # and it is not plain 2x2 merging
    merged = patch_mean_labels(
        initial.reshape(2, 16, 16, -1).permute(0, 3, 1, 2), 2)
    assert (pooled - merged).abs().max() > 1e-3


class EyeSoftmax(torch.nn.Softmax):

    def forward(self, x):
        return torch.eye(x.shape[-1]).expand_as(x)


# ------------------------------------------- build from config, checkpoints

COMPONENTS = [
    (dict(type='ShiftedPatchTokenization', in_channels=3, embed_dims=16,
          patch_size=4, input_size=32), lambda: torch.randn(2, 3, 32, 32)),
    (dict(type='LocalitySelfAttention', embed_dims=24, num_heads=3),
     lambda: torch.randn(2, 9, 24)),
    (dict(type='LocalityWindowMSA', embed_dims=24, window_size=(3, 3),
          num_heads=3), lambda: torch.randn(2, 9, 24)),
    (dict(type='SLViT', arch=VIT_ARCH), lambda: torch.randn(2, 3, 32, 32)),
    (dict(type='SLSwin', arch=SWIN_ARCH), lambda: torch.randn(2, 3, 32, 32)),
]


def _first(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


@pytest.mark.parametrize('cfg,make_input', COMPONENTS,
                         ids=[c['type'] for c, _ in COMPONENTS])
def test_builds_from_config_and_round_trips_checkpoint(cfg, make_input):
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    randomise(model, 1)
    model.eval()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(1)
    again = MODELS.build(cfg)
    again.eval()
    x = make_input()
    assert not torch.equal(_first(again(x)), _first(model(x)))
    again.load_state_dict(torch.load(buffer, weights_only=True), strict=True)
    assert torch.equal(_first(again(x)), _first(model(x)))


def test_sl_vit_checkpoint_loads_into_tlalign_classifier():
    cfg = dict(
        type='ImageClassifier',
        backbone=dict(type='SLViT', arch=VIT_ARCH),
        head=dict(type='VisionTransformerClsHead', num_classes=10,
                  in_channels=48))
    plain = MODELS.build(cfg)
    tl = MODELS.build(dict(cfg, type='TLAlignClassifier'))
    assert set(tl.state_dict()) == set(plain.state_dict())
    tl.load_state_dict(plain.state_dict(), strict=True)


# ------------------------------------------------------------------ configs

SL_CONFIGS = sorted(glob.glob(osp.join(ROOT, 'configs', 'sl_vit', '*.py')))
DEMO_CONFIGS = [
    osp.join(ROOT, 'configs', 'demo', f'sl-vit-tiny-p4_1xb64-{k}_digits.py')
    for k in ('cutmix', 'tlalign')
]
SMALL = {
    'VisionTransformer': dict(arch=VIT_ARCH),
    'SLViT': dict(arch=VIT_ARCH),
    'SwinTransformer': dict(arch=SWIN_ARCH),
    'SLSwin': dict(arch=SWIN_ARCH),
}


@pytest.mark.parametrize('path', SL_CONFIGS + DEMO_CONFIGS,
                         ids=[osp.basename(p) for p in SL_CONFIGS +
                              DEMO_CONFIGS])
def test_config_parses_and_model_builds(path):
    cfg = Config.fromfile(path)
    model_cfg = cfg.model
    backbone = model_cfg.backbone
    head = model_cfg.head
    data = cfg.train_dataloader.dataset
    assert head.num_classes == cfg.data_preprocessor.num_classes
    # mmpretrain's augments, recorded by TLAlignClassifier in the twins
    augments = [a['type'] for a in model_cfg.train_cfg.augments]
    assert not any(a.startswith('TL') for a in augments)
    if 'demo' not in path:
        # the paper's recipe
        assert augments == ['Mixup', 'CutMix']
        assert cfg.train_cfg.max_epochs == 100
        assert cfg.train_dataloader.batch_size == 128
        # the original's epoch: three shuffled passes, drop_last
        assert cfg.train_dataloader.sampler.type == 'MultiPassSampler'
        assert cfg.train_dataloader.sampler.num_passes == 3
        assert cfg.train_dataloader.drop_last is True
        assert cfg.optim_wrapper.optimizer.type == 'AdamW'
        assert cfg.optim_wrapper.optimizer.lr == 1e-3
        assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
        assert head.loss.label_smooth_val == 0.1
        types = [t['type'] for t in data.pipeline]
        assert 'AutoAugment' in types and 'ZhongRandomErasing' in types
        erase = [t for t in data.pipeline
                 if t['type'] == 'ZhongRandomErasing']
        assert erase[0]['erase_prob'] == 0.25
        assert data.get('download', False) is False
        assert cfg.param_scheduler[0].end == 10
        # the paper's archs; image and patch size agree with the dataset
        tiny = 'tiny-imagenet' in path
        assert backbone.img_size == (64 if tiny else 32)
        if 'Swin' in backbone.type:
            assert backbone.arch == dict(embed_dims=96, depths=[2, 6, 4],
                                         num_heads=[3, 6, 12])
            assert backbone.window_size == 4
            assert backbone.patch_size == (4 if tiny else 2)
            assert backbone.stage_cfgs.block_cfgs.ffn_ratio == 2
        else:
            assert backbone.arch == dict(embed_dims=192, num_layers=9,
                                         num_heads=12,
                                         feedforward_channels=384)
            assert backbone.patch_size == (8 if tiny else 4)
        # the plain ViT is SLViT with SPT and LSA off (for the official
        # initialisation); the plain Swin is mmpretrain's
        sl = '/sl-' in path
        assert backbone.type.startswith('SL') == (sl or '/vit_' in path)
        if backbone.type == 'SLViT':
            assert backbone.use_spt == backbone.use_lsa == sl
    small = small_model_cfg(cfg)
    model = MODELS.build(small)
    assert type(model.backbone).__name__ == backbone.type
    describe(model.backbone)


def small_model_cfg(cfg):
    """``cfg.model`` with a small arch, and the top-level data preprocessor
    as mmengine's Runner passes it."""
    model = copy.deepcopy(cfg.model)
    model.setdefault('data_preprocessor', cfg.data_preprocessor)
    model.backbone.update(SMALL[model.backbone.type])
    model.head.in_channels = 48 if 'ViT' in model.backbone.type or \
        model.backbone.type == 'VisionTransformer' else 96
    return model


@pytest.mark.parametrize('base,message', [
    ('cifar10_bs128_sl.py', r'cifar-10-batches-py/\s+data_batch_1'),
    ('cifar100_bs128_sl.py', r'cifar-100-python/\s+train'),
    ('tiny-imagenet_bs128_sl.py', 'train/<wnid>/images'),
])
def test_missing_dataset_names_the_expected_layout(base, message, tmp_path):
    cfg = Config.fromfile(osp.join(ROOT, 'configs', '_base_', 'datasets',
                                   base))
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        dataset = loader.dataset.copy()
        dataset.data_root = str(tmp_path / 'nowhere')
        with pytest.raises(FileNotFoundError, match=message):
            DATASETS.build(dataset)


def test_tiny_imagenet_flat_val_layout_is_refused(tmp_path):
    root = tmp_path / 'tiny'
    (root / 'val' / 'images').mkdir(parents=True)
    (root / 'val' / 'val_annotations.txt').write_text('val_0.JPEG n0 0 0 1 1')
    with pytest.raises(FileNotFoundError, match='flat validation layout'):
        DATASETS.build(dict(type='TinyImageNet', data_root=str(root),
                            split='val'))


def test_cifar_never_downloads():
    with pytest.raises(ValueError, match='never downloads'):
        DATASETS.build(dict(type='LocalCIFAR10', data_root='x',
                            download=True))



def test_spt_grid_other_than_the_patch_embedding_is_a_clear_error():
    # mmpretrain's PatchEmbed without padding makes a 7x7 grid of 30x30
    # images; SPT pads (like mmcv's AdaptivePadding) and would make 8x8.
    with pytest.raises(ValueError, match=r'SPT token grid \(8, 8\) differs '
                       r'from the patch embedding it replaces \(\(7, 7\)\)'):
        build_vit(img_size=30, patch_cfg=dict(padding=0))
