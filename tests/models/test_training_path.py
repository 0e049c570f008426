"""Labels follow the training-time token path: drop-path, attention dropout,
and the ablation switches (the paper's Table 8)."""
import pytest
import torch

from tlalign_mm.models import aligned_forward

from .dense_reference import dense_vit_labels
from .test_vit_alignment import build_vit, random_mix


def capture_attention_io(vit):
    """Record each attention module's input and output of the next call."""
    ios = []
    handles = [
        layer.attn.register_forward_hook(
            lambda m, args, out: ios.append((args[0].detach(),
                                             out.detach())))
        for layer in vit.layers
    ]
    return ios, handles


def explicit_attention(attn, x):
    B, N, _ = x.shape
    qkv = attn.qkv(x).reshape(B, N, 3, attn.num_heads,
                              attn.head_dims).permute(2, 0, 3, 1, 4)
    A = torch.softmax(qkv[0] @ qkv[1].transpose(-2, -1) *
                      attn.head_dims**-0.5, -1)
    out = attn.gamma1(attn.proj((A @ qkv[2]).transpose(1, 2).reshape(B, N,
                                                                     -1)))
    return A, out


class TorchBernoulliDropPath(torch.nn.Module):
    """A drop-path whose RNG use differs from mmcv's and timm's: it draws
    its mask with ``torch.bernoulli`` on a float vector."""

    def __init__(self, drop_prob):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        if not self.training or self.drop_prob == 0:
            return x
        keep = 1 - self.drop_prob
        mask = torch.bernoulli(torch.full((x.shape[0], ), keep,
                                          device=x.device))
        return x * (mask / keep).view(-1, *([1] * (x.dim() - 1)))


def set_drop_path(vit, kind, rate=0.5):
    """Put a drop-path of ``kind`` on every block's attention branch: the
    taps must learn the mask from the module's own call, whatever RNG it
    draws from."""
    import timm.layers
    for layer in vit.layers:
        if kind == 'mmcv':
            layer.attn.out_drop.drop_prob = rate
        elif kind == 'timm':
            layer.attn.out_drop = timm.layers.DropPath(rate)
        else:
            layer.attn.out_drop = TorchBernoulliDropPath(rate)


DROP_PATHS = ['mmcv', 'timm', 'torch.bernoulli']


@pytest.mark.parametrize('kind', DROP_PATHS)
@pytest.mark.parametrize('follow', [True, False])
def test_drop_path_keeps_labels_of_dropped_samples(follow, kind):
    vit = build_vit()
    set_drop_path(vit, kind)
    vit.train()
    images, pw, _ = random_mix(8, 2, 32, 32)
    ios, handles = capture_attention_io(vit)
    torch.manual_seed(3)
    aligned = aligned_forward(vit, images, pw, keep_history=True,
                              follow_drop_path=follow)
    for h in handles:
        h.remove()
    dropped_any = kept_any = False
    for i, (layer, (x_in, out)) in enumerate(zip(vit.layers, ios)):
        with torch.no_grad():
            A, undropped = explicit_attention(layer.attn, x_in)
        # The mask the model used, read off its tokens.
        dropped = out.flatten(1).abs().amax(1) == 0
        torch.testing.assert_close(out[~dropped], undropped[~dropped] / 0.5,
                                   atol=1e-5, rtol=1e-5)
        before, after = aligned.history[i], aligned.history[i + 1]
        expected = (before + A.mean(1) @ before) / 2
        if follow:
            torch.testing.assert_close(after[dropped], before[dropped],
                                       atol=0, rtol=0)
            torch.testing.assert_close(after[~dropped], expected[~dropped],
                                       atol=1e-5, rtol=0)
        else:
            torch.testing.assert_close(after, expected, atol=1e-5, rtol=0)
        dropped_any |= bool(dropped.any())
        kept_any |= bool((~dropped).any())
    assert dropped_any and kept_any  # the seed exercises both branches


@pytest.mark.parametrize('kind', DROP_PATHS)
def test_recording_draws_no_extra_random_numbers(kind):
    vit = build_vit(out_type='raw')
    set_drop_path(vit, kind)
    for layer in vit.layers:
        layer.attn.attn_drop = 0.2
    vit.train()
    images, pw, _ = random_mix(6, 2, 32, 32)
    torch.manual_seed(5)
    plain = vit(images)[0]
    vit.out_type = 'avg_featmap'
    vit.ln2 = torch.nn.Identity()
    torch.manual_seed(5)
    aligned = aligned_forward(vit, images, pw)
    torch.testing.assert_close(aligned.feats[0], plain[:, 1:].mean(1),
                               atol=1e-5, rtol=1e-5)


def test_attention_dropout_labels_use_pre_dropout_attention():
    vit = build_vit()
    for layer in vit.layers:
        layer.attn.attn_drop = 0.5
    vit.train()
    images, pw, targets = random_mix(3, 2, 32, 32)
    ios, handles = capture_attention_io(vit)
    aligned = aligned_forward(vit, images, pw, keep_history=True)
    for h in handles:
        h.remove()
    for i, (layer, (x_in, _)) in enumerate(zip(vit.layers, ios)):
        with torch.no_grad():
            A, _ = explicit_attention(layer.attn, x_in)
        before = aligned.history[i]
        torch.testing.assert_close(aligned.history[i + 1],
                                   (before + A.mean(1) @ before) / 2,
                                   atol=1e-5, rtol=0)


@pytest.mark.parametrize('align_layers,residual_norm', [
    ('last', True),
    ([1], True),
    ('all', False),
    ([0, 2], False),
])
def test_ablation_switches_match_dense_reference(align_layers, residual_norm):
    vit = build_vit()
    images, pw, targets = random_mix(3, 2, 32, 32, box=(5, 27, 2, 19))
    aligned = aligned_forward(vit, images, pw, align_layers=align_layers,
                              residual_norm=residual_norm)
    layers = None if align_layers == 'all' else (
        [-1] if align_layers == 'last' else align_layers)
    with torch.no_grad():
        ref, _, _ = dense_vit_labels(vit, images, pw, targets,
                                     pw.mean((2, 3)), 8, align_layers=layers,
                                     residual_norm=residual_norm)
        full, _, _ = dense_vit_labels(vit, images, pw, targets,
                                      pw.mean((2, 3)), 8)
    ours = aligned.expand(targets).double()
    assert (ours - ref).abs().max() <= 1e-5
    assert (ours - full).abs().max() > 1e-4  # the switch changed something


def test_bad_align_layers():
    vit = build_vit()
    images, pw, _ = random_mix(2, 2, 32, 32)
    with pytest.raises(ValueError, match='out of range'):
        aligned_forward(vit, images, pw, align_layers=[7])
    with pytest.raises(ValueError, match="'all', 'last'"):
        aligned_forward(vit, images, pw, align_layers='first')
