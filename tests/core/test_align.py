"""``core.align`` on hand-built slots: two blocks (one with a dropped
sample), a merge, and a block that recorded its probabilities, against the
rule computed by hand in float64; a slot missing what it expects is the
error."""
import pytest
import torch

from tlalign_mm.core import (
    AlignOptions,
    Recorded,
    Slot,
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
    slots = [Slot(q=q1, k=k1), Slot(q=q2, k=k2, keep=keep),
             Slot(step=TokenStep((2, 4), merge_2x2, 'merge'), probs=probs),
             Slot()]
    # the initial labels: the embedding's rule of the pixel weights
    records = Recorded(slots, embed=lambda pixel_weights: Y)
    pw = torch.ones(B, S, 1, 1) / S
    labels, history = align(records, pw, keep_history=True)

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
    _, history = align(records, pw, keep_history=True, options=AlignOptions(
        follow_drop_path=False, residual_norm=False))
    y1 = head_mean(q1, k1) @ Y.double()
    assert (history[1].double() - y1).abs().max() < 1e-6
    assert (history[2].double() - head_mean(q2, k2) @ y1).abs().max() < 1e-6


def test_a_slot_missing_what_it_expects_is_the_error():
    Y = torch.ones(1, 4, 1)
    q = torch.zeros(1, 1, 4, 2)
    records = Recorded([Slot(q=q, k=q), Slot(('attention', 'key_map'), q=q,
                                             k=q), Slot()],
                       embed=lambda pixel_weights: Y)
    with pytest.raises(RuntimeError, match='Block 1 recorded no key_map'):
        align(records, torch.ones(1, 1, 2, 2))
