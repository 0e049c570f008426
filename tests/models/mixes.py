"""Random mixes and class-space helpers shared by the alignment tests."""
import torch


def random_mix(B, S, H, W, seed=1, box=None):
    """``(images, pixel_weights, targets)`` of a random mix of ``S`` sources.

    Without ``box``: blocks of 3x3 pixels with random shares (sharpened by a
    fourth power), so patches and windows hold uneven shares. With ``box``
    ``(y1, y2, x1, x2)``: a CutMix box from source 1 (``S`` = 2).
    Targets are random distributions over 10 classes.
    """
    g = torch.Generator().manual_seed(seed)
    if box is None:
        pw = torch.rand(B, S, -(-H // 3), -(-W // 3), generator=g).pow(4)
        pw = pw.repeat_interleave(3, 2).repeat_interleave(3, 3)[..., :H, :W]
        pw = pw / pw.sum(1, keepdim=True)
    else:
        y1, y2, x1, x2 = box
        pw = torch.zeros(B, 2, H, W)
        pw[:, 0] = 1
        pw[:, 0, y1:y2, x1:x2] = 0
        pw[:, 1] = 1 - pw[:, 0]
    targets = torch.rand(B, S, 10, generator=g)
    targets = targets / targets.sum(-1, keepdim=True)
    images = torch.randn(B, 3, H, W, generator=g)
    return images, pw, targets


def in_classes(weights, targets):
    """(B, S) or (B, N, S) source weights -> class space, in float64."""
    spec = 'bs,bsc->bc' if weights.dim() == 2 else 'bns,bsc->bnc'
    return torch.einsum(spec, weights.double(), targets.double())


def history_in_classes(history, targets):
    return [in_classes(h, targets) for h in history]


def assert_history_close(history, reference, length, targets=None):
    """``length`` entries, each within 1e-5 of the dense reference's (in
    class space with ``targets``): float32 labels against float64."""
    ours = history if targets is None else history_in_classes(history,
                                                              targets)
    assert len(ours) == len(reference) == length
    for mine, theirs in zip(ours, reference):
        assert (mine.double().cpu() - theirs).abs().max() <= 1e-5


def head_samples(model):
    """The list the head's loss appends the data samples it is given to."""
    given, loss = [], model.head.loss
    model.head.loss = lambda x, samples: given.extend(samples) or loss(
        x, samples)
    return given


def identity_attention(query, key, labels, bias=None, scale=None,
                       impl='auto', with_mass=False):
    """``head_mean_attention`` of attention that moves nothing (``A = I``):
    monkeypatch it into :mod:`tlalign_mm.core.records`, where recorded q/k
    attention is applied to labels."""
    labels = labels.float()
    return labels, labels.sum(-1, keepdim=True) if with_mass else None
