"""Load a Swin checkpoint into a different window size (e.g. 7 -> 12) on
SciPy >= 1.14.

mmpretrain 1.2.0's ``SwinTransformer`` (and ``BEiT``) resizes a checkpoint's
relative-position bias tables in its ``load_state_dict`` pre-hook with
``resize_relative_position_bias_table`` (``models/utils/embed.py``,
unchanged at open-mmlab/mmpretrain@0979e78), which fits a bicubic spline
per head with ``scipy.interpolate.interp2d(kind='cubic')``. SciPy 1.14
removed ``interp2d`` (its stub raises), so the load fails.

We keep mmpretrain's resize and replace only that call, by the replacement
SciPy's "Interpolate transition guide" (SciPy 1.13, section 1.1) gives for a
regular grid, "which should preserve the interp2d results exactly":
``RectBivariateSpline(x, y, z.T)(xnew, ynew).T`` (both fit FITPACK's
interpolating bicubic with ``regrid_smth`` and evaluate with ``bispev``,
clamping points outside the data to the edge).

Importing :mod:`tlalign_mm` calls :func:`install_mmpretrain_resize`, which
rebinds that one name in :data:`MMPRETRAIN_MODULES`, only on a SciPy without
``interp2d``; SciPy is not patched. There is no registry hook instead: every
``SwinTransformer`` registers the load hook, which calls the resize by name.
The relative-position *index* buffers are not resized (the hook drops them;
a strict load allows them missing: ``allow_missing=
('*.relative_position_index',)``).
"""
import importlib
from typing import Callable, List, Sequence

import numpy as np
import scipy
import torch
from packaging.version import Version

#: SciPy 1.14 removed ``scipy.interpolate.interp2d`` (its stub raises).
INTERP2D_REMOVED = Version(scipy.__version__).release >= (1, 14)

#: The modules that bind the resize: definition, re-export, two callers.
MMPRETRAIN_MODULES = (
    'mmpretrain.models.utils.embed',
    'mmpretrain.models.utils',
    'mmpretrain.models.backbones.swin_transformer',
    'mmpretrain.models.backbones.beit',
)
_NAME = 'resize_relative_position_bias_table'


def _increasing(values, name: str) -> np.ndarray:
    values = np.ravel(np.asarray(values, dtype=np.float64))
    if values.size < 4:
        raise ValueError(f'a bicubic spline needs at least 4 points along '
                         f'{name}, got {values.size}.')
    return values


def interp2d_cubic(x: Sequence[float], y: Sequence[float],
                   z: np.ndarray) -> Callable[[Sequence[float],
                                                Sequence[float]],
                                               np.ndarray]:
    """``scipy.interpolate.interp2d(x, y, z, kind='cubic')`` on a regular
    grid with its defaults (``bounds_error=False``, ``fill_value=None``), as
    its regular-grid path does it (scipy/scipy@00192de,
    ``interpolate/_interpolate.py``): unsorted ``x``/``y`` sorted with their
    columns/rows of ``z`` (``(n, m)``, ``z[j, i] = f(x[i], y[j])``, m, n >=
    4); the returned ``f(xnew, ynew)`` sorts its query points and returns
    ``(len(ynew), len(xnew))`` float64, points outside the data taking the
    value at the nearest edge."""
    x = _increasing(x, 'x')
    y = _increasing(y, 'y')
    z = np.asarray(z, dtype=np.float64)
    if z.shape != (len(y), len(x)):
        raise ValueError(
            f'z must have shape (len(y), len(x)) = ({len(y)}, {len(x)}) '
            f'on a regular grid, got {z.shape}.')
    if not np.all(x[1:] >= x[:-1]):
        order = np.argsort(x)
        x, z = x[order], z[:, order]
    if not np.all(y[1:] >= y[:-1]):
        order = np.argsort(y)
        y, z = y[order], z[order, :]
    from scipy.interpolate import RectBivariateSpline  # only when resizing
    spline = RectBivariateSpline(x, y, z.T, kx=3, ky=3, s=0)

    def evaluate(xnew: Sequence[float], ynew: Sequence[float]) -> np.ndarray:
        xnew = np.sort(np.atleast_1d(np.asarray(xnew, dtype=np.float64)),
                       kind='mergesort')
        ynew = np.sort(np.atleast_1d(np.asarray(ynew, dtype=np.float64)),
                       kind='mergesort')
        if xnew.ndim != 1 or ynew.ndim != 1:
            raise ValueError('x and y should both be 1-D arrays')
        return spline(xnew, ynew).T

    return evaluate


def resize_relative_position_bias_table(src_shape: int, dst_shape: int,
                                        table: torch.Tensor,
                                        num_head: int) -> torch.Tensor:
    """mmpretrain 1.2.0's ``resize_relative_position_bias_table`` (same
    signature, same result: a ``(dst_shape ** 2, num_head)`` table of
    torch's default dtype), with :func:`interp2d_cubic` for ``interp2d``.

    The source offsets ``-s..s`` are spread geometrically over ``-d..d``
    (offset ``k`` at ``1 + q + ... + q^(k-1)``, ``q`` by bisection so that
    the outermost lands near ``d``); the spline through them is read at the
    integer offsets ``-d..d``.
    """
    def geometric_progression(a, r, n):
        return a * (1.0 - r**n) / (1.0 - r)

    left, right = 1.01, 1.5
    while right - left > 1e-6:
        q = (left + right) / 2.0
        gp = geometric_progression(1, q, src_shape // 2)
        if gp > dst_shape // 2:
            right = q
        else:
            left = q

    dis = []
    cur = 1
    for i in range(src_shape // 2):
        dis.append(cur)
        cur += q**(i + 1)
    r_ids = [-d for d in reversed(dis)]
    x = r_ids + [0] + dis
    y = r_ids + [0] + dis

    t = dst_shape // 2.0
    dx = np.arange(-t, t + 0.1, 1.0)
    dy = np.arange(-t, t + 0.1, 1.0)

    all_rel_pos_bias = []
    for i in range(num_head):
        z = table[:, i].view(src_shape, src_shape).float().cpu().numpy()
        f_cubic = interp2d_cubic(x, y, z)
        all_rel_pos_bias.append(
            torch.Tensor(f_cubic(dx, dy)).contiguous().view(-1, 1).to(
                table.device))
    return torch.cat(all_rel_pos_bias, dim=-1)


def install_mmpretrain_resize(force: bool = False) -> List[str]:
    """Rebind ``resize_relative_position_bias_table`` to ours in each of
    :data:`MMPRETRAIN_MODULES` that still holds mmpretrain's own
    (:data:`MMPRETRAIN_RESIZE`), where SciPy lacks ``interp2d`` (or with
    ``force``, for tests); anything else bound there is left alone. Returns
    the modules rebound by this call."""
    if not (INTERP2D_REMOVED or force):
        return []
    patched = []
    for name in MMPRETRAIN_MODULES:
        module = importlib.import_module(name)
        if getattr(module, _NAME, None) is MMPRETRAIN_RESIZE:
            setattr(module, _NAME, resize_relative_position_bias_table)
            patched.append(name)
    return patched


#: mmpretrain's own function (it calls the removed ``interp2d``).
MMPRETRAIN_RESIZE = getattr(importlib.import_module(MMPRETRAIN_MODULES[0]),
                            _NAME)
install_mmpretrain_resize()
