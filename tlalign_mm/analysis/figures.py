"""The analysis tools' plots (matplotlib, headless Agg backend)."""
import re
from typing import Dict, List, Optional, Sequence

import numpy as np


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: str, dpi: int = 100) -> str:
    if fig.get_layout_engine() is None:  # constrained layout lays out itself
        fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    _pyplot().close(fig)
    return path


def wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters where it can break:
    between words, and inside a longer word after ``_`` or ``-`` (config
    names have no spaces)."""
    pieces = []  # (piece, whether a space precedes it)
    for word in text.split():
        parts = re.findall(r'[^_-]+[_-]*|[_-]+', word) if len(word) > width \
            else [word]
        pieces += [(p, i == 0) for i, p in enumerate(parts)]
    lines = []
    for piece, spaced in pieces:
        joined = (lines[-1] + ' ' * spaced + piece) if lines else piece
        if lines and len(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(piece)
    return '\n'.join(lines)


def rmse_bars(names: Sequence[str], rmse: Sequence[float], path: str,
              title: str = 'RMSE: CutMix label vs TL-Align label') -> str:
    """One bar per model (the paper's Fig. 3); the names (config and
    checkpoint) wrapped under their bars and the title to the figure's
    width, room above the bars for their values."""
    plt = _pyplot()
    width = max(4.0, 1.7 * len(names) + 1.2)
    fig, ax = plt.subplots(figsize=(width, 3.6), layout='constrained')
    bars = ax.bar(range(len(names)), rmse, color='#4c72b0')
    ax.bar_label(bars, fmt='%.4f', fontsize=8)
    ax.margins(y=0.15)
    ax.set_xticks(range(len(names)), [wrap(n, 20) for n in names],
                  fontsize=8)
    ax.set_ylabel('RMSE of the mixing ratio')
    ax.set_title(wrap(title, int(width * 9)), fontsize=10)
    return _save(fig, path)


def presence_distribution(values: List[np.ndarray], path: str,
                          extra: Optional[List[float]] = None) -> str:
    """Box plot of every block's token presences, the class token's mean
    as a marker."""
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
    ``tlalign``, ``cutmix``, ``transmix``) in one line plot; ``spread``
    (the similarity ratio's std over images) as a band; every line and the
    band in the legend, beside the plot."""
    plt = _pyplot()
    styles = dict(similarity=('k', 'o-', 'feature similarity (mean)'),
                  tlalign=('tab:red', 's-', 'TL-Align label'),
                  cutmix=('tab:blue', '--', 'CutMix (area)'),
                  transmix=('tab:green', '-.', 'TransMix'))
    fig, ax = plt.subplots(figsize=(6.8, 3.2), layout='constrained')
    for name, values in series.items():
        colour, style, label = styles[name]
        x = np.arange(1, len(values) + 1)
        ax.plot(x, values, style, color=colour, label=label, ms=4)
        if name == 'similarity' and spread is not None:
            ax.fill_between(x, values - spread, values + spread,
                            color=colour, alpha=0.1,
                            label='feature similarity ± 1 std\nover images')
    ax.set_xticks(np.arange(1, len(next(iter(series.values()))) + 1))
    ax.set_xlabel('block')
    ax.set_ylabel('share of image 1')
    ax.set_title('Mixing ratio of the classified token', fontsize=10)
    fig.legend(fontsize=8, loc='outside right upper')
    return _save(fig, path)


def label_map_grid(images1, images2, mixed, initial, aligned, path: str,
                   titles: Optional[List[str]] = None, dpi: int = 80,
                   mix: str = 'CutMix') -> str:
    """Rows of image 1, image 2, the image the augment ``mix`` made of
    them, the initial and the aligned label map (``(H, W, 3)`` arrays in [0,
    1]; maps by :func:`.label_maps.label_colours`, whose key is drawn
    below)."""
    plt = _pyplot()
    from matplotlib.colors import LinearSegmentedColormap
    rows = len(mixed)
    heads = ['image 1', 'image 2', f'mixed ({mix})', 'initial labels',
             'aligned labels']
    fig, axes = plt.subplots(rows, 5, figsize=(7.5, 1.6 * rows + 0.9),
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
    fig.tight_layout(rect=(0, 0.6 / (1.6 * rows + 0.9), 1, 1))
    # label_colours: w1 * red + w2 * blue, i.e. linear from blue to red
    key = LinearSegmentedColormap.from_list('labels', [(0, 0, 1), (1, 0, 0)])
    left, right = axes[-1, 3].get_position(), axes[-1, 4].get_position()
    bar = fig.add_axes((left.x0, 0.25 / fig.get_figheight(),
                        right.x1 - left.x0, 0.12 / fig.get_figheight()))
    fig.colorbar(plt.cm.ScalarMappable(cmap=key), cax=bar,
                 orientation='horizontal', ticks=[0, 0.5, 1])
    ends = bar.set_xticklabels(['0: image 2', '0.5', '1: image 1'],
                               fontsize=7)
    ends[0].set_ha('left')
    ends[-1].set_ha('right')
    bar.set_title("token label: image 1's share", fontsize=7)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _target_colours(targets: Sequence[str]) -> Dict[str, str]:
    """The main job's targets (tools/run_demo.py) in fixed colours."""
    more = iter(('tab:green', 'tab:purple', 'tab:orange', 'tab:brown'))
    fixed = {'CutMix': 'tab:blue', 'TL-Align': 'tab:red'}
    return {t: fixed.get(t) or next(more) for t in targets}


def _paired_dots(ax, accuracy: Dict[str, Dict[int, float]],
                 colours: Dict[str, str]) -> None:
    """Each seed's accuracies, one column per target, joined by a line
    (green where the next target is higher, red lower, grey equal); the
    mean of each target as a black bar; a legend of the lines below."""
    from matplotlib.lines import Line2D
    targets = list(accuracy)
    seeds = sorted(set.intersection(*(set(a) for a in accuracy.values())))
    x = np.arange(len(targets))
    for seed in seeds:
        ys = [accuracy[t][seed] for t in targets]
        for i in range(len(targets) - 1):
            d = ys[i + 1] - ys[i]
            colour = 'tab:green' if d > 1e-6 else \
                'tab:red' if d < -1e-6 else 'grey'
            ax.plot(x[i:i + 2], ys[i:i + 2], '-', color=colour, lw=0.9,
                    alpha=0.6)
    for i, t in enumerate(targets):
        ys = [accuracy[t][s] for s in seeds]
        ax.plot(np.full(len(ys), x[i]), ys, 'o', color=colours[t], ms=4,
                alpha=0.85, zorder=3)
        ax.plot([x[i] - 0.18, x[i] + 0.18], [np.mean(ys)] * 2, 'k-', lw=2,
                zorder=4)
    ax.set_xticks(x, targets, fontsize=8)
    ax.set_xlim(-0.5, len(targets) - 0.5)
    ax.set_ylabel('held-out top-1 (%)', fontsize=8)
    if len(targets) > 1:
        later = targets[-1] if len(targets) == 2 else 'the next target'
        handles = [Line2D([], [], color=c, lw=1.2, label=label)
                   for c, label in (('tab:green', f'a seed, {later} higher'),
                                    ('tab:red', f'a seed, {later} lower'),
                                    ('grey', 'a seed, tied'))]
        handles.append(Line2D([], [], color='k', lw=2, label='mean'))
        ax.legend(handles=handles, fontsize=6.5, loc='upper center',
                  bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)


def _curve_bands(ax, curves: Dict[str, tuple],
                 colours: Dict[str, str]) -> None:
    """Mean over seeds and a band of +-1 standard deviation, each in the
    legend."""
    handles = []
    for t, (epochs, acc) in curves.items():
        acc = np.asarray(acc, dtype=float)
        mean = acc.mean(0)
        handles += ax.plot(epochs, mean, '.-', color=colours[t], lw=1.5,
                           ms=3, label=f'{t}, mean of {len(acc)}')
        if len(acc) > 1:
            std = acc.std(0, ddof=1)
            handles.append(ax.fill_between(
                epochs, mean - std, mean + std, color=colours[t],
                alpha=0.18, lw=0, label=f'{t}, ±1 sd'))
    ax.set_xlabel('epoch', fontsize=8)
    ax.set_ylabel('validation top-1 (%)', fontsize=8)
    ax.legend(handles=handles, fontsize=6.5, loc='lower right')


def _intervals(ax, intervals: Sequence[dict], baseline: str) -> None:
    """One horizontal 95% interval per entry (``label``, ``mean``, ``ci``,
    ``recorded``), top to bottom; this job's in black, recorded ones in
    grey; zero dashed."""
    from matplotlib.lines import Line2D
    y = np.arange(len(intervals))[::-1]
    for yi, entry in zip(y, intervals):
        colour = 'grey' if entry['recorded'] else 'k'
        low, high = entry['ci']
        if low == low:  # nan with one seed
            ax.plot([low, high], [yi, yi], '-', color=colour, lw=2)
        ax.plot(entry['mean'], yi, 'o', color=colour, ms=5)
    ax.axvline(0, color='tab:blue', ls='--', lw=0.9)
    ax.set_yticks(y, [e['label'] for e in intervals], fontsize=7)
    ax.set_ylim(-0.7, len(intervals) - 0.3)
    ax.set_xlabel(f'difference from {baseline} (points of top-1)',
                  fontsize=8)
    handles = [Line2D([], [], color='k', lw=2, marker='o', ms=4,
                      label='this job: mean, 95% CI'),
               Line2D([], [], color='grey', lw=2, marker='o', ms=4,
                      label='recorded: mean, 95% CI'),
               Line2D([], [], color='tab:blue', ls='--', lw=0.9,
                      label=f'no difference from {baseline}')]
    ax.legend(handles=handles, fontsize=6.5, loc='upper center',
              bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)


def seed_comparison(accuracy: Dict[str, Dict[str, Dict[int, float]]],
                    curves: Dict[str, Dict[str, tuple]], path: str,
                    titles: Optional[Dict[str, str]] = None,
                    dpi: int = 100,
                    intervals: Optional[Sequence[dict]] = None,
                    baseline: str = 'CutMix') -> str:
    """The main job's picture, a column per model: each seed's final
    ``accuracy`` ``{model: {target: {seed: top-1}}}`` (targets in plotting
    order, the baseline first) as paired dots, over the validation
    ``curves`` ``{model: {target: (epochs (E,), top-1 (n_seeds, E))}}`` as
    mean and +-1 std band; ``titles``: ``{model: title}`` of the top row.
    ``intervals`` (``dict(label, mean, ci, recorded)`` each): the paired
    differences from ``baseline`` with their 95% intervals, this job's
    beside the recorded ones, in a last column."""
    plt = _pyplot()
    models = list(accuracy)
    targets = list(dict.fromkeys(t for m in models for t in accuracy[m]))
    colours = _target_colours(targets)
    columns = len(models) + bool(intervals)
    fig = plt.figure(figsize=(3.6 * columns, 6.6), layout='constrained')
    grid = fig.add_gridspec(2, columns)
    for j, model in enumerate(models):
        top, bottom = fig.add_subplot(grid[0, j]), fig.add_subplot(grid[1, j])
        _paired_dots(top, accuracy[model], colours)
        top.set_title((titles or {}).get(model, model), fontsize=8.5)
        if model in curves:
            _curve_bands(bottom, curves[model], colours)
        bottom.set_title(f'{model}: validation over training', fontsize=8.5)
        for ax in (top, bottom):
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3, lw=0.5)
    if intervals:
        ax = fig.add_subplot(grid[:, -1])
        _intervals(ax, intervals, baseline)
        ax.set_title(f'Paired difference from {baseline}\n(95% CI, paired t)',
                     fontsize=8.5)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3, lw=0.5, axis='x')
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
