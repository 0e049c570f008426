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


def swin(window_size: int) -> SwinTransformer:
    return SwinTransformer(arch=ARCH, img_size=96, window_size=window_size,
                           out_indices=(1, ), pad_small_map=True)


def test_window7_checkpoint_loads_into_window12():
    torch.manual_seed(0)
    state = swin(7).state_dict()
    generator = torch.Generator().manual_seed(1)
    for key, value in state.items():
        if key.endswith('relative_position_bias_table'):
            # order-1 values (the init is std 0.02): a real comparison
            value.copy_(torch.randn(value.shape, generator=generator))
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
