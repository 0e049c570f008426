"""The analysis tools' plots (matplotlib, headless Agg backend)."""
from typing import Dict, List, Optional, Sequence

import numpy as np


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str, dpi: int = 100) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    _pyplot().close(fig)
    return path


def rmse_bars(names: Sequence[str], rmse: Sequence[float], path: str,
              title: str = 'RMSE: CutMix label vs TL-Align label') -> str:
    """One bar per model (the paper's Fig. 3)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(3.5, 1.2 * len(names) + 1.5), 3.2))
    bars = ax.bar(range(len(names)), rmse, color='#4c72b0')
    ax.bar_label(bars, fmt='%.4f', fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=20, ha='right',
                  fontsize=8)
    ax.set_ylabel('RMSE of the mixing ratio')
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def presence_distribution(values: List[np.ndarray], path: str,
                          extra: Optional[List[float]] = None) -> str:
    """Box plot of the token presences of every block; the class token's
    mean presence as a marker."""
    plt = _pyplot()
    L = len(values)
    fig, ax = plt.subplots(figsize=(max(4, 0.5 * L + 2), 3.2))
    ax.boxplot(values, showfliers=True, flierprops=dict(markersize=2))
    ax.axhline(1.0, color='grey', lw=0.8, ls='--')
    if extra is not None:
        ax.plot(range(1, L + 1), extra, 'r^', ms=5, label='class token')
        ax.legend(fontsize=8)
    ax.set_xlabel('block')
    ax.set_ylabel('presence  $p(z_i)=\\sum_j \\bar A_{ji}$')
    ax.set_title('Token presence per block', fontsize=10)
    return _save(fig, path)


def mixing_ratio_lines(series: Dict[str, np.ndarray], path: str,
                       spread: Optional[np.ndarray] = None) -> str:
    """The mean source-0 ratio per block of each series (``similarity``,
    ``tlalign``, ``cutmix``, ``transmix``) in one line plot."""
    plt = _pyplot()
    styles = dict(similarity=('k', 'o-', 'feature similarity'),
                  tlalign=('tab:red', 's-', 'TL-Align label'),
                  cutmix=('tab:blue', '--', 'CutMix (area)'),
                  transmix=('tab:green', '-.', 'TransMix'))
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for name, values in series.items():
        colour, style, label = styles[name]
        x = np.arange(1, len(values) + 1)
        ax.plot(x, values, style, color=colour, label=label, ms=4)
        if name == 'similarity' and spread is not None:
            ax.fill_between(x, values - spread, values + spread,
                            color=colour, alpha=0.1)
    ax.set_xticks(np.arange(1, len(next(iter(series.values()))) + 1))
    ax.set_xlabel('block')
    ax.set_ylabel('share of image 1')
    ax.set_title('Mixing ratio of the classified token', fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


def label_map_grid(images1, images2, mixed, initial, aligned, path: str,
                   titles: Optional[List[str]] = None, dpi: int = 80) -> str:
    """Rows of: image 1, image 2, mixed image, initial label map, aligned
    label map (all ``(H, W, 3)``/``(h, w, 3)`` arrays in [0, 1])."""
    plt = _pyplot()
    rows = len(mixed)
    heads = ['image 1', 'image 2', 'mixed', 'initial labels',
             'aligned labels']
    fig, axes = plt.subplots(rows, 5, figsize=(7.5, 1.6 * rows + 0.3),
                             squeeze=False)
    for r in range(rows):
        for c, img in enumerate((images1[r], images2[r], mixed[r],
                                 initial[r], aligned[r])):
            ax = axes[r, c]
            ax.imshow(img, interpolation='nearest')
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(heads[c], fontsize=8)
        if titles:
            axes[r, 4].set_xlabel(titles[r], fontsize=7)
    return _save(fig, path, dpi=dpi)
