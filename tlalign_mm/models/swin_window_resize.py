"""Load a Swin checkpoint into a different window size (e.g. 7 -> 12) on
SciPy >= 1.14.

mmpretrain 1.2.0's ``SwinTransformer`` resizes every relative-position bias
table of a checkpoint whose window size differs from the model's, in its
``load_state_dict`` pre-hook ``_prepare_relative_position_bias_table``
(``mmpretrain/models/backbones/swin_transformer.py``; ``BEiT`` does the
same). The resize, ``resize_relative_position_bias_table``
(``mmpretrain/models/utils/embed.py``, unchanged on mmpretrain's main branch,
open-mmlab/mmpretrain@0979e78), fits a bicubic spline per head with
``scipy.interpolate.interp2d(x, y, z, kind='cubic')``. SciPy 1.14 removed
``interp2d``: the name is still there but raises ``NotImplementedError``, so
the load fails.

This module keeps mmpretrain's resize (the same geometric grid, the same
spline) and replaces only the removed call, by the replacement SciPy's
"Interpolate transition guide" (docs.scipy.org, SciPy 1.13, section 1.1)
gives for a regular grid, "which should preserve the interp2d results
exactly": ``RectBivariateSpline(x, y, z.T)(xnew, ynew).T``. Both fit
FITPACK's interpolating (``s=0``) bicubic spline with ``regrid_smth`` and
evaluate it with ``bispev``, which clamps points outside the data to its
edge (interp2d's docstring, scipy/scipy@00192de: "values
outside the domain are extrapolated via nearest-neighbor extrapolation" for
``fill_value=None``); see :func:`interp2d_cubic`.

How it is installed: importing :mod:`tlalign_mm` imports this module, which
calls :func:`install_mmpretrain_resize`. That rebinds one name,
``resize_relative_position_bias_table``, in the mmpretrain modules that hold
it (:data:`MMPRETRAIN_MODULES`), and only on a SciPy without ``interp2d``,
where mmpretrain's own function can only raise. No other name is touched,
SciPy is not patched (other libraries keep seeing SciPy as it is), and on an
older SciPy mmpretrain's own function stays in place. There is no registry
hook to use instead: the resize is called by name from inside
``SwinTransformer``'s load hook, which every ``SwinTransformer`` registers,
whatever the config.

The relative-position *index* buffers are not resized: mmpretrain's hook
drops them from the checkpoint and the model keeps its own, so a strict load
lists them as missing (``allow_missing=('*.relative_position_index',)`` for
:func:`tlalign_mm.checkpoint.strict.load_strictly`).
"""
import importlib
from typing import Callable, List, Sequence

import numpy as np
import scipy
import torch
from packaging.version import Version

__all__ = [
    'INTERP2D_REMOVED', 'MMPRETRAIN_MODULES', 'MMPRETRAIN_RESIZE',
    'interp2d_cubic', 'resize_relative_position_bias_table',
    'install_mmpretrain_resize'
]

#: SciPy 1.14 removed ``scipy.interpolate.interp2d`` (its stub raises).
INTERP2D_REMOVED = Version(scipy.__version__).release >= (1, 14)

#: the mmpretrain modules that bind ``resize_relative_position_bias_table``
#: (its definition, the package re-export, and its two callers).
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
    grid, with interp2d's defaults (``bounds_error=False``,
    ``fill_value=None``), as removed in SciPy 1.14.

    Follows interp2d's regular-grid path (scipy/scipy@00192de,
    ``scipy/interpolate/_interpolate.py``): unsorted ``x``/``y`` are sorted
    with their columns/rows of ``z``; the spline is FITPACK's interpolating
    bicubic (``regrid_smth`` with ``s=0``: the not-a-knot spline through
    every grid value); the returned function sorts its query points and
    evaluates with ``bispev`` (points outside the data take the value at the
    nearest edge) and returns ``(len(ynew), len(xnew))``, transposed from
    FITPACK's ``(x, y)`` order. ``RectBivariateSpline`` runs the same two
    FITPACK routines.

    Args:
        x (Sequence[float]): the ``m`` column coordinates (m >= 4).
        y (Sequence[float]): the ``n`` row coordinates (n >= 4).
        z (np.ndarray): values of shape ``(n, m)``: ``z[j, i] = f(x[i],
            y[j])``.

    Returns:
        Callable: ``f(xnew, ynew) -> ndarray`` of shape ``(len(ynew),
        len(xnew))`` (float64).
    """
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
    """mmpretrain 1.2.0's ``resize_relative_position_bias_table``
    (``mmpretrain/models/utils/embed.py``, same signature, same result),
    with its ``interp2d(kind='cubic')`` replaced by :func:`interp2d_cubic`.

    The source table's relative offsets ``-s..s`` (``s = src_shape // 2``)
    are spread geometrically over ``-d..d`` (``d = dst_shape // 2``): offset
    ``k`` sits at ``1 + q + ... + q^(k-1)``, ``q`` found by bisection so that
    the outermost lands near ``d``; the spline through them is read at the
    integer offsets ``-d..d``.

    Args:
        src_shape (int): side of the checkpoint's table, ``2 * window - 1``
            (13 for window 7).
        dst_shape (int): side of the model's table (23 for window 12).
        table (torch.Tensor): ``(src_shape ** 2, num_head)``.
        num_head (int): number of attention heads.

    Returns:
        torch.Tensor: ``(dst_shape ** 2, num_head)`` on ``table``'s device,
        of torch's default dtype (as mmpretrain's ``torch.Tensor(...)``).
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
    """Make mmpretrain's Swin/BEiT window-size resize use
    :func:`resize_relative_position_bias_table` where SciPy lacks
    ``interp2d``.

    Rebinds ``resize_relative_position_bias_table`` in each module of
    :data:`MMPRETRAIN_MODULES` that still holds mmpretrain's own function
    (:data:`MMPRETRAIN_RESIZE`); anything else bound there (a later fix,
    another patch) is left alone. Idempotent.

    Args:
        force (bool): install even where SciPy still has ``interp2d``
            (tests). Defaults to False.

    Returns:
        list[str]: the modules rebound by this call.
    """
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
