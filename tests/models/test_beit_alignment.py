"""TL-Align through mmpretrain's BEiTViT against a dense reference, and the
training-time path (drop-path shared by both branches, attention
dropout)."""
import pytest
import torch
from mmpretrain.registry import MODELS

from tlalign_mm import align_labels
from tlalign_mm.models import aligned_forward, describe

from .dense_reference_beit import dense_beit_labels, relative_bias
from .mixes import assert_history_close, random_mix

ARCH = dict(embed_dims=32, num_layers=3, num_heads=2, feedforward_channels=64)


def build_beit(sharpen=4.0, seed=0, **kwargs):
    """A tiny BEiTViT on 32x32 (4x4 patches of 8) with random relative
    position tables, q/v biases and layer scale, sharpened attention."""
    torch.manual_seed(seed)
    cfg = dict(type='BEiTViT', arch=ARCH, img_size=32, patch_size=8)
    cfg.update(kwargs)
    beit = MODELS.build(cfg)
    beit.init_weights()
    with torch.no_grad():
        for name, p in beit.named_parameters():
            if 'relative_position_bias_table' in name or name.endswith(
                    ('q_bias', 'v_bias', 'cls_token', 'pos_embed')):
                p.normal_(0, 1)
            elif name.endswith(('gamma_1', 'gamma_2')):
                p.uniform_(0.2, 1.0)
        for layer in beit.layers:
            layer.attn.qkv.weight[:2 * ARCH['embed_dims']] *= sharpen
    beit.eval()
    return beit


CASES = {
    'relative bias, cls': dict(out_type='cls_token'),
    'relative bias, pooled (the fine-tune recipe)': dict(),
    'shared relative bias, cls, final norm': dict(
        out_type='cls_token', use_rel_pos_bias=False,
        use_shared_rel_pos_bias=True, final_norm=True),
    'shared relative bias, pooled': dict(
        use_rel_pos_bias=False, use_shared_rel_pos_bias=True),
    'no relative bias, absolute, no layer scale, cls': dict(
        out_type='cls_token', use_rel_pos_bias=False, use_abs_pos_emb=True,
        layer_scale_init_value=0.),
    'no class token, absolute, pooled': dict(
        with_cls_token=False, use_rel_pos_bias=False, use_abs_pos_emb=True),
}


@pytest.mark.parametrize('S', [2, 3])
@pytest.mark.parametrize('name', list(CASES))
def test_matches_dense_reference(name, S):
    beit = build_beit(**CASES[name])
    assert 'attn_drop_input' in {t.kind for t in describe(beit).taps}
    box = (3, 21, 5, 30) if S == 2 else None
    images, pw, targets = random_mix(3, S, 32, 32, box=box)
    area_share = pw.mean((2, 3))
    aligned = aligned_forward(beit, images, pw, keep_history=True)
    with torch.no_grad():
        ref, ref_history, ref_feat = dense_beit_labels(
            beit, images, pw, targets, area_share, patch=8)
    # The reference's forward is the model's: the bias and q_bias it adds
    # are the ones the model uses.
    assert (aligned.feats[-1] - ref_feat).abs().max() < 1e-4
    assert (aligned.expand(targets).double() - ref).abs().max() <= 1e-5
    assert_history_close(aligned.history, ref_history,
                         ARCH['num_layers'] + 1, targets)
    # The labels moved away from the CutMix (area) target.
    area = torch.einsum('bs,bsc->bc', area_share.double(), targets.double())
    assert (ref - area).abs().max() > 1e-3
    torch.testing.assert_close(align_labels(beit, images, pw, targets),
                               aligned.expand(targets), atol=0, rtol=0)


def test_relative_bias_of_the_reference_is_the_models():
    """The reference's pair loop gives the bias BEiTAttention looks up."""
    beit = build_beit(out_type='cls_token')
    attn = beit.layers[0].attn
    n = 4 * 4 + 1
    theirs = attn.relative_position_bias_table[
        attn.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
    ours = relative_bias(attn.relative_position_bias_table, (4, 4))
    assert torch.equal(ours, theirs)


def drop_path_calls(beit):
    """Every ``drop_path`` output of the next forward, per block in call
    order: the attention branch's, then the FFN's."""
    calls = [[] for _ in beit.layers]
    handles = [
        layer.drop_path.register_forward_hook(
            lambda m, args, out, i=i: calls[i].append(out.detach()))
        for i, layer in enumerate(beit.layers)
    ]
    return calls, handles


def attention_inputs(beit):
    inputs = []
    handles = [
        layer.attn.register_forward_hook(
            lambda m, args, kwargs, out: inputs.append(
                (args[0].detach(), kwargs.get('rel_pos_bias'))),
            with_kwargs=True) for layer in beit.layers
    ]
    return inputs, handles


def explicit_attention(attn, x, shared=None):
    """``(B, H, N, N)`` BEiT attention of ``x`` (the model's own
    parameters, written out)."""
    B, N, C = x.shape
    bias = torch.cat([attn.q_bias, torch.zeros_like(attn.v_bias),
                      attn.v_bias])
    q, k, _ = (x @ attn.qkv.weight.T + bias).reshape(
        B, N, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-2, -1) * attn.scale
    if attn.relative_position_bias_table is not None:
        logits = logits + relative_bias(attn.relative_position_bias_table,
                                        (4, 4))
    if shared is not None:
        logits = logits + shared
    return logits.softmax(-1)


@pytest.mark.parametrize('shared', [False, True])
def test_drop_path_keep_is_the_attention_branchs(shared):
    """BEiT's block calls one drop_path on the attention branch, then on
    the FFN branch: a sample the first call dropped keeps its labels, one
    it kept takes the block's pre-dropout attention, whatever the second
    call did."""
    beit = build_beit(drop_path_rate=0.9, use_rel_pos_bias=not shared,
                      use_shared_rel_pos_bias=shared)
    for layer in beit.layers:
        layer.attn.attn_drop.p = 0.3
    beit.train()
    images, pw, _ = random_mix(8, 2, 32, 32)
    calls, handles = drop_path_calls(beit)
    inputs, more = attention_inputs(beit)
    torch.manual_seed(3)
    aligned = aligned_forward(beit, images, pw, keep_history=True)
    for h in handles + more:
        h.remove()
    differ = False
    for i, (layer, (x, rel), (attn_out, ffn_out)) in enumerate(
            zip(beit.layers, inputs, calls)):
        dropped = attn_out.flatten(1).abs().amax(1) == 0
        differ |= bool((dropped != (ffn_out.flatten(1).abs().amax(1) == 0)
                        ).any())
        with torch.no_grad():
            A = explicit_attention(layer.attn, x, rel)
        before, after = aligned.history[i], aligned.history[i + 1]
        expected = (before + A.mean(1) @ before) / 2
        torch.testing.assert_close(after[dropped], before[dropped], atol=0,
                                   rtol=0)
        torch.testing.assert_close(after[~dropped], expected[~dropped],
                                   atol=1e-5, rtol=0)
    # The seed makes the two branches' decisions differ: the test can tell
    # which call's keep was recorded.
    assert differ


def test_out_indices_before_the_last_block_is_an_error():
    beit = build_beit(out_indices=[1])
    with pytest.raises(NotImplementedError, match='out_indices=-1'):
        describe(beit)
    with pytest.raises(NotImplementedError, match='out_indices=-1'):
        MODELS.build(dict(type='TLAlignClassifier',
                          backbone=dict(type='BEiTViT', arch=ARCH,
                                        img_size=32, patch_size=8,
                                        out_indices=[1]),
                          head=dict(type='LinearClsHead', num_classes=2,
                                    in_channels=ARCH['embed_dims'])))


@pytest.mark.parametrize('out_type', ['featmap', 'raw'])
def test_token_map_readout_is_an_error(out_type):
    beit = build_beit(out_type=out_type)
    images, pw, _ = random_mix(2, 2, 32, 32)
    with pytest.raises(ValueError, match="out_type='cls_token' or"):
        aligned_forward(beit, images, pw)
