"""Shared checks of a MixRecord against the batch it describes, and of a
recording augment against the mmpretrain augment it records."""
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F


def _seed(seed):
    np.random.seed(seed)
    torch.manual_seed(seed)
    random.seed(seed)


def _rng_state():
    """numpy, torch and python random states, comparable with ``==``."""
    kind, keys, pos, gauss, cached = np.random.get_state()
    return (kind, keys.tolist(), pos, gauss, cached,
            torch.get_rng_state().tolist(), random.getstate())


def random_batch(batch_size, img_h, img_w, seed, dtype=torch.float32,
                 num_classes=7):
    """``(inputs (B, 3, H, W), one-hot scores (B, num_classes))`` drawn
    from a generator seeded with ``seed``: uint8 pixels or normal floats."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        inputs = torch.randint(
            0, 256, (batch_size, 3, img_h, img_w), generator=g).to(torch.uint8)
    else:
        inputs = torch.randn(batch_size, 3, img_h, img_w, generator=g)
    labels = torch.randint(0, num_classes, (batch_size, ), generator=g)
    return inputs, F.one_hot(labels, num_classes)


def _mix_like_mmpretrain(tl_aug, ref_aug, inputs, scores, seed):
    """From ``seed``, ``tl_aug.mix_with_record`` and ``tl_aug(...)`` give
    mmpretrain's ``ref_aug`` images and scores bit for bit and leave the
    random state as it does, without touching ``inputs``; returns
    ``(mixed, mixed_scores, record)``."""
    _seed(seed)
    # mmpretrain's augments mix in place: give them a copy.
    ref_inputs, ref_scores = ref_aug(inputs.clone(), scores)
    ref_state = _rng_state()
    _seed(seed)
    before = inputs.clone()
    mixed, mixed_scores, record = tl_aug.mix_with_record(inputs, scores)
    assert _rng_state() == ref_state, \
        f'other random draws than {type(ref_aug).__name__}'
    assert torch.equal(inputs, before), 'inputs modified in place'
    assert mixed.dtype == ref_inputs.dtype
    assert torch.equal(mixed, ref_inputs)
    assert torch.equal(mixed_scores, ref_scores)
    assert mixed_scores.dtype == torch.float32
    # The drop-in __call__ is mmpretrain's too.
    _seed(seed)
    call_inputs, call_scores = tl_aug(inputs.clone(), scores)
    assert torch.equal(call_inputs, ref_inputs)
    assert torch.equal(call_scores, ref_scores)
    assert _rng_state() == ref_state
    return mixed, mixed_scores, record


def _check_record(record,
                  inputs,
                  scores,
                  mixed_inputs,
                  mixed_scores,
                  exact_pixels=True,
                  area_is_cls=True,
                  sources=None):
    """Assert that ``record`` describes how ``inputs`` / ``scores`` became
    ``mixed_inputs`` / ``mixed_scores``.

    ``sources``: each source's image as the mix lays it out, ``S`` tensors
    ``(B, C, H, W)``; default ``inputs[source_index[:, s]]`` in place
    (ResizeMix pastes a resized copy: :func:`_resized_sources`)."""
    batch_size = inputs.size(0)
    img_h, img_w = inputs.shape[-2:]
    pw, si, cw = record.pixel_weights, record.source_index, record.area_share
    num_sources = pw.size(1)
    assert pw.shape == (batch_size, num_sources, img_h, img_w)
    assert pw.dtype == torch.float32 and pw.device == inputs.device
    assert si.shape == (batch_size, num_sources) and si.dtype == torch.long
    assert cw.shape == (batch_size, num_sources)
    assert torch.equal(si[:, 0], torch.arange(batch_size))
    assert bool((pw >= 0).all())
    # rtol=0, atol=1e-6 on shares and labels in [0, 1] (float32): 8 ulp
    # of 1 (2^-23 = 1.2e-7); the sides differ by a few roundings (a
    # two-term lam * a + (1 - lam) * b, a mean over the image's pixels)
    torch.testing.assert_close(
        pw.sum(1), torch.ones(batch_size, img_h, img_w), rtol=0, atol=1e-6)

    # The record rebuilds the mixed image.
    if sources is None:
        sources = [inputs[si[:, s]] for s in range(num_sources)]
    rebuilt = sum(pw[:, s:s + 1] * sources[s].float()
                  for s in range(num_sources))
    if exact_pixels:
        assert torch.equal(rebuilt, mixed_inputs.float())
    else:
        torch.testing.assert_close(
            rebuilt, mixed_inputs.float(), rtol=1e-5, atol=1e-5)

    # ... and the mixed scores.
    rebuilt_scores = torch.einsum('bs,bsc->bc', cw, scores.float()[si])
    torch.testing.assert_close(rebuilt_scores, mixed_scores, rtol=0, atol=1e-6)

    if area_is_cls:
        torch.testing.assert_close(pw.mean((2, 3)), cw, rtol=0, atol=1e-6)


def _resized_sources(record, inputs, interpolation):
    """ResizeMix's layout of its two sources, from the record alone:
    ``inputs`` in place, and the partner ``inputs[source_index[:, 1]]``
    resized into the bounding box of ``pixel_weights[:, 1] > 0``."""
    rows, cols = record.pixel_weights[0, 1].nonzero(as_tuple=True)
    pasted = torch.zeros_like(inputs)
    if rows.numel():
        y1, y2 = int(rows.min()), int(rows.max()) + 1
        x1, x2 = int(cols.min()), int(cols.max()) + 1
        pasted[:, :, y1:y2, x1:x2] = F.interpolate(
            inputs[record.source_index[:, 1]], size=(y2 - y1, x2 - x1),
            mode=interpolation, align_corners=False)
    return [inputs, pasted]


def _cell_min_max(weights, patch_size):
    """Min and max of ``weights (..., H, W)`` over each grid cell (partial
    cells at the border included)."""
    shape = weights.shape
    w = weights.reshape(-1, 1, *shape[-2:])
    cell_max = F.max_pool2d(w, patch_size, ceil_mode=True)
    cell_min = -F.max_pool2d(-w, patch_size, ceil_mode=True)
    out_shape = (*shape[:-2], *cell_max.shape[-2:])
    return cell_min.reshape(out_shape), cell_max.reshape(out_shape)


@pytest.fixture
def seed():
    """``seed(n)`` seeds numpy, torch and python random."""
    return _seed


@pytest.fixture
def rng_state():
    return _rng_state


@pytest.fixture
def mix_like_mmpretrain():
    return _mix_like_mmpretrain


@pytest.fixture
def check_record():
    return _check_record


@pytest.fixture
def resized_sources():
    return _resized_sources


@pytest.fixture
def cell_min_max():
    return _cell_min_max
