"""``core.align`` on hand-built records: two blocks (one with a dropped
sample), a merge, and a block that recorded its probabilities, against the
rule computed by hand in float64."""
import torch

from tlalign_mm.core import (
    Attention,
    DropPath,
    TokenStep,
    align,
    flatten_label_map,
)


def head_mean(q, k):
    A = torch.softmax(q.double() @ k.double().transpose(-2, -1) *
                      q.shape[-1]**-0.5, -1)
    return A.mean(1)


def merge_2x2(label_map):
    """``(B, S, 2, 4)`` -> ``(B, 2, S)``: the mean of each 2x2 window."""
    return flatten_label_map(torch.nn.functional.avg_pool2d(label_map, 2))


def test_align_on_hand_built_records_equals_the_hand_computation():
    torch.manual_seed(0)
    B, H, N, d, S = 2, 2, 8, 4, 3
    Y = torch.rand(B, N, S)
    Y = Y / Y.sum(-1, keepdim=True)
    q1, k1, q2, k2 = (torch.randn(B, H, N, d) * 2 for _ in range(4))
    probs = torch.softmax(torch.randn(B, H, 2, 2) * 3, -1)
    keep = torch.tensor([True, False]).view(B, 1, 1)  # sample 1 dropped
    records = [
        Attention(q1, k1),
        Attention(q2, k2), DropPath(keep),
        TokenStep((2, 4), merge_2x2, 'merge'),
        Attention(probs=probs),
    ]
    labels, history = align(records, Y, keep_history=True)

    y = Y.double()
    expected = [y]
    y = (y + head_mean(q1, k1) @ y) / 2  # block 0: the paper's rule
    expected.append(y)
    moved = (y + head_mean(q2, k2) @ y) / 2  # block 1: sample 1 dropped
    y = torch.stack([moved[0], y[1]])
    expected.append(y)
    y = y.view(B, 2, 4, S).permute(0, 3, 1, 2)  # the merge: 2x2 means
    y = y.reshape(B, S, 1, 2, 2, 2).mean((3, 5)).flatten(2).transpose(1, 2)
    y = (y + probs.double().mean(1) @ y) / 2  # block 2: given probs
    expected.append(y)

    assert len(history) == len(expected)
    for ours, theirs in zip(history, expected):
        assert (ours.double() - theirs).abs().max() < 1e-6
    assert (labels.double() - y).abs().max() < 1e-6
    # the dropped sample kept its labels in block 1, the other did not
    assert torch.equal(history[2][1], history[1][1])
    assert (history[2][0] - history[1][0]).abs().max() > 1e-3

    # the options arrive as arguments: drop-path ignored, no residual
    _, history = align(records, Y, keep_history=True,
                       follow_drop_path=False, residual_norm=False)
    y1 = head_mean(q1, k1) @ Y.double()
    assert (history[1].double() - y1).abs().max() < 1e-6
    assert (history[2].double() - head_mean(q2, k2) @ y1).abs().max() < 1e-6
