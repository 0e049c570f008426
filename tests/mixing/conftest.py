"""Shared checks of a recording augment: it mixes as the mmpretrain augment
it stands for (bit for bit, random state included), and its MixRecord
describes the batch it made."""
import random

import numpy as np
import torch
import torch.nn.functional as F


def close(a, b, rtol=0., atol=1e-6):
    """Default for shares and labels in [0, 1] (float32): atol 1e-6 is 8
    ulp of 1 (2^-23 = 1.2e-7); the sides differ by a few roundings (a
    two-term lam * a + (1 - lam) * b, a mean over the image's pixels)."""
    assert torch.allclose(a, b, rtol=rtol, atol=atol), (a - b).abs().max()


def seed(s):
    """Seed numpy, python and torch's CPU generator (not torch.manual_seed:
    with CUDA not initialised it also queues a CUDA seeding with its stack
    trace, milliseconds a call)."""
    np.random.seed(s)
    torch.default_generator.manual_seed(s)
    random.seed(s)


def rng_state():
    """numpy, torch and python random states, comparable with ``==``."""
    kind, keys, *rest = np.random.get_state()
    return (kind, keys.tobytes(), *rest, random.getstate(),
            torch.get_rng_state().numpy().tobytes())


def random_batch(batch_size, img_h, img_w, dtype=torch.float32):
    """``(inputs (B, 3, H, W), one-hot scores (B, 7))``: uint8 pixels or
    normal floats, from a generator seeded by the shape."""
    g = torch.Generator().manual_seed(batch_size * 1000 + img_h * img_w)
    shape = (batch_size, 3, img_h, img_w)
    return (torch.randint(0, 256, shape, generator=g).to(dtype)
            if dtype == torch.uint8 else torch.randn(shape, generator=g),
            F.one_hot(torch.randint(0, 7, (batch_size, ), generator=g), 7))


def mix_and_check(aug, inputs, scores, s, ref=None, correct_lam=True,
                  interpolation='bilinear'):
    """Mix ``inputs`` under seed ``s`` with ``aug.mix_with_record`` and
    check: ``inputs`` untouched; ``aug(...)`` (the drop-in path) gives the
    same batch and random state; with ``ref`` (an mmpretrain augment) both
    are ``ref``'s bit for bit. The record's pixel weights and sources
    rebuild the images (bit for bit but MixUp's blend), its area shares the
    scores and, unless the lambda is uncorrected, the pixel shares.
    Returns the record."""
    if ref is not None:
        seed(s)  # mmpretrain's augments mix in place: give them a copy
        ref_out, ref_state = ref(inputs.clone(), scores), rng_state()
    seed(s)
    before = inputs.clone()
    mixed, mixed_scores, record = aug.mix_with_record(inputs, scores)
    state = rng_state()
    assert torch.equal(inputs, before), 'inputs modified in place'
    assert mixed_scores.dtype == torch.float32
    if ref is not None:
        assert state == ref_state, f'other draws than {type(ref).__name__}'
        assert mixed.dtype == ref_out[0].dtype
        assert torch.equal(mixed, ref_out[0])
        assert torch.equal(mixed_scores, ref_out[1])
    seed(s)
    call_inputs, call_scores = aug(inputs.clone(), scores)
    assert torch.equal(call_inputs, mixed) and rng_state() == state
    assert torch.equal(call_scores, mixed_scores)
    pw, si, area = record.pixel_weights, record.source_index, record.area_share
    assert pw.shape == (*si.shape, *inputs.shape[-2:])
    assert pw.dtype == torch.float32
    assert si.shape == area.shape == (inputs.size(0), record.num_sources)
    assert torch.equal(si[:, 0], torch.arange(inputs.size(0)))
    if record.num_sources == 2:  # the partner is a permutation of the batch
        assert sorted(si[:, 1].tolist()) == list(range(inputs.size(0)))
    close(pw.sum(1), torch.ones_like(pw[:, 0]))
    sources = [inputs[si[:, s]].float() for s in range(record.num_sources)]
    if record.mode == 'resizemix':
        sources[1] = resized_partner(record, inputs, interpolation)
    rebuilt = sum(pw[:, s:s + 1] * v for s, v in enumerate(sources))
    if record.mode == 'mixup':  # one blend weight over the whole image;
        assert bool((pw[:, :1] == area[:, :1, None, None]).all())
        # 2 roundings of lam * a + (1 - lam) * b on pixels up to 255
        close(rebuilt, mixed.float(), rtol=1e-5, atol=1e-5)
    else:  # every pixel from one source
        assert bool(((pw == 0) | (pw == 1)).all())
        assert torch.equal(rebuilt, mixed.float())
    close(torch.einsum('bs,bsc->bc', area, scores.float()[si]), mixed_scores)
    if correct_lam:
        close(pw.mean((2, 3)), area)
    return record


def resized_partner(record, inputs, interpolation):
    """ResizeMix's second source, from the record alone: the partner
    resized into the bounding box of ``pixel_weights[:, 1] > 0``."""
    rows, cols = record.pixel_weights[0, 1].nonzero(as_tuple=True)
    pasted = torch.zeros_like(inputs, dtype=torch.float32)
    y1, y2 = int(rows.min()), int(rows.max()) + 1  # an empty box: refused
    x1, x2 = int(cols.min()), int(cols.max()) + 1
    pasted[..., y1:y2, x1:x2] = F.interpolate(
        inputs[record.source_index[:, 1]], size=(y2 - y1, x2 - x1),
        mode=interpolation, align_corners=False)
    return pasted


def replaced_cells(record, patch_size):
    """Per-cell weight of source 1 of a cell mix (``(rows, cols)``, partial
    border cells included), asserting each cell is one source and the mask
    is the batch's."""
    w = record.pixel_weights[:, 1:2]
    cell_max = F.max_pool2d(w, patch_size, ceil_mode=True)[:, 0]
    cell_min = -F.max_pool2d(-w, patch_size, ceil_mode=True)[:, 0]
    assert torch.equal(cell_min, cell_max), 'a cell mixes two sources'
    assert bool((cell_min == cell_min[:1]).all()), 'one mask per batch'
    return cell_min[0]

