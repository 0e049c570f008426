"""A window-7 Swin checkpoint loads into a window-12 Swin on SciPy >= 1.14.

The reference interpolation shares no code with the module: the bicubic
interpolating spline is built axis by axis from ``CubicSpline`` with the
not-a-knot end condition (the interior knots FITPACK places for ``s=0``,
which is what ``interp2d(kind='cubic')`` fitted), with query points beyond
the data clamped to the edge (interp2d's documented "nearest-neighbor
extrapolation"). Only mmpretrain's geometric grid is recomputed the way
mmpretrain computes it (see :func:`geometric_grid`).
"""
import importlib

import numpy as np
import pytest
import torch
from mmpretrain.models.backbones import SwinTransformer
from scipy.interpolate import CubicSpline
from scipy.optimize import brentq

import tlalign_mm  # noqa: F401  (installs the resize)
from tlalign_mm.checkpoint import load_strictly
from tlalign_mm.models import swin_window_resize as resize

ARCH = dict(embed_dims=8, depths=[2, 2], num_heads=[1, 2])


def geometric_grid(src_side: int, dst_side: int) -> np.ndarray:
    """mmpretrain's source offsets: offset ``k`` of ``1..s`` sits at
    ``1 + q + ... + q^(k-1)``, the outermost at ``d = dst_side // 2``.

    ``q`` is the midpoint of the last bracket of mmpretrain's bisection
    (width 1e-6 on [1.01, 1.5]); it is checked against the exact root,
    which alone would move the outer offsets by 2e-5 and the resized values
    by up to 2e-4."""
    s, d = src_side // 2, dst_side // 2

    def outermost(r):
        return sum(r**k for k in range(s))

    left, right = 1.01, 1.5
    while right - left > 1e-6:
        q = (left + right) / 2
        left, right = (left, q) if outermost(q) > d else (q, right)
    exact = brentq(lambda r: outermost(r) - d, 1.0 + 1e-9, 2.0)
    assert abs(q - exact) <= 1e-6
    dis = np.cumsum([q**k for k in range(s)])
    return np.concatenate([-dis[::-1], [0.0], dis])


def not_a_knot_2d(x, y, z, xq, yq) -> np.ndarray:
    """``(len(yq), len(xq))`` values of the bicubic not-a-knot spline
    through ``z[j, i] = f(x[i], y[j])``, clamped beyond the data."""
    xq = np.clip(xq, x[0], x[-1])
    yq = np.clip(yq, y[0], y[-1])
    along_x = CubicSpline(x, z, axis=1, bc_type='not-a-knot')(xq)
    return CubicSpline(y, along_x, axis=0, bc_type='not-a-knot')(yq)


def test_interp2d_cubic_reproduces_a_bicubic_polynomial():
    # A polynomial of degree <= 3 in each variable is its own interpolating
    # bicubic spline: exact inside, edge value (clamped) outside.
    def f(x, y):
        return 1 + 2 * x - 0.5 * x**2 * y + 0.25 * y**3 + 0.1 * x**3 * y**3

    x = np.array([-3.0, -1.7, -0.4, 0.0, 0.9, 2.2, 3.1])
    y = np.array([-2.0, -1.1, 0.3, 1.0, 2.5])
    z = f(x[None, :], y[:, None])
    spline = resize.interp2d_cubic(x, y, z)
    xq = np.array([-2.5, 0.05, 1.3, 3.0])
    yq = np.array([-1.9, 0.7, 2.4])
    # float64 values of order 1: 1e-10 is ~10^6 ulp, far below any error of
    # a wrong spline (off by 1e-2 or more at these points)
    np.testing.assert_allclose(spline(xq, yq), f(xq[None, :], yq[:, None]),
                               rtol=0, atol=1e-10)
    # outside the data: the value at the nearest edge
    np.testing.assert_allclose(spline([5.0], [-4.0]), [[f(3.1, -2.0)]],
                               rtol=0, atol=1e-10)
    # interp2d sorts both the data and the query points
    np.testing.assert_allclose(
        resize.interp2d_cubic(x[::-1], y, z[:, ::-1])(xq[::-1], yq),
        spline(xq, yq), rtol=0, atol=1e-12)


def test_interp2d_cubic_rejects_a_bad_grid():
    with pytest.raises(ValueError, match=r'shape \(len\(y\), len\(x\)\)'):
        resize.interp2d_cubic(np.arange(5), np.arange(4), np.zeros((5, 4)))
    with pytest.raises(ValueError, match='at least 4 points'):
        resize.interp2d_cubic(np.arange(3), np.arange(4), np.zeros((4, 3)))


def swin(window_size: int) -> SwinTransformer:
    return SwinTransformer(arch=ARCH, img_size=96, window_size=window_size,
                           out_indices=(1, ), pad_small_map=True)


def window7_checkpoint() -> dict:
    torch.manual_seed(0)
    state = swin(7).state_dict()
    generator = torch.Generator().manual_seed(1)
    for key, value in state.items():
        if key.endswith('relative_position_bias_table'):
            # order-1 values (the init is std 0.02): a real comparison
            value.copy_(torch.randn(value.shape, generator=generator))
    return state


def test_window7_checkpoint_loads_into_window12():
    state = window7_checkpoint()
    model = swin(12)
    own_index = {k: v.clone() for k, v in model.state_dict().items()
                 if k.endswith('relative_position_index')}
    missing, unexpected, resized = load_strictly(
        model, dict(state), 'window 7',
        allow_missing=('*.relative_position_index', ))
    assert sorted(missing) == sorted(own_index) and len(missing) == 4
    assert unexpected == []
    # the tables and the index buffers are the only shapes that differ
    assert sorted(k for k, _, _ in resized) == sorted(
        k for k in state if '.relative_position_' in k)

    grid = geometric_grid(13, 23)
    query = np.arange(-11.0, 11.5, 1.0)
    loaded = model.state_dict()
    for key, table in state.items():
        if key.endswith('relative_position_bias_table'):
            assert loaded[key].shape == (23 * 23, table.shape[1])
            for head in range(table.shape[1]):
                z = table[:, head].reshape(13, 13).double().numpy()
                expected = not_a_knot_2d(grid, grid, z, query, query)
                np.testing.assert_allclose(
                    loaded[key][:, head].reshape(23, 23).numpy(), expected,
                    rtol=0, atol=1e-5)
        elif key.endswith('relative_position_index'):
            # dropped by mmpretrain's hook: the model keeps its own
            assert torch.equal(loaded[key], own_index[key])
        else:
            assert torch.equal(loaded[key], table), key
    model.eval()  # mmpretrain's Swin.train() returns None: no chaining
    with torch.no_grad():
        out = model(torch.randn(1, 3, 96, 96))
    assert out[0].shape == (1, 16, 12, 12) and torch.isfinite(out[0]).all()


@pytest.mark.skipif(not resize.INTERP2D_REMOVED,
                    reason='SciPy still has interp2d')
def test_mmpretrain_alone_fails_on_this_scipy(monkeypatch):
    from mmpretrain.models.backbones import swin_transformer
    monkeypatch.setattr(swin_transformer,
                        'resize_relative_position_bias_table',
                        resize.MMPRETRAIN_RESIZE)
    with pytest.raises(NotImplementedError, match='interp2d'):
        swin(12).load_state_dict(window7_checkpoint(), strict=False)


def test_install_rebinds_only_mmpretrains_resize(monkeypatch):
    modules = [importlib.import_module(n) for n in resize.MMPRETRAIN_MODULES]
    expected = resize.resize_relative_position_bias_table \
        if resize.INTERP2D_REMOVED else resize.MMPRETRAIN_RESIZE
    assert all(m.resize_relative_position_bias_table is expected
               for m in modules)
    assert resize.install_mmpretrain_resize() == []  # idempotent

    # mmpretrain's own function is replaced; anything else stays
    sentinel = object()
    for module in modules:
        monkeypatch.setattr(
            module, 'resize_relative_position_bias_table',
            sentinel if module.__name__.endswith('.beit') else
            resize.MMPRETRAIN_RESIZE)
    patched = resize.install_mmpretrain_resize(force=True)
    assert patched == [n for n in resize.MMPRETRAIN_MODULES
                       if not n.endswith('.beit')]
    beit = modules[resize.MMPRETRAIN_MODULES.index(
        'mmpretrain.models.backbones.beit')]
    assert beit.resize_relative_position_bias_table is sentinel
