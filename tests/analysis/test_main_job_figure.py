"""The main job's picture keeps its text (issue 41): every title, axis
label, tick label and legend entry lies inside the saved figure, and what
is drawn is in a legend (the pairing lines, every curve and band, the
intervals). (The analysis tools' plots: issue 41's own tests.)"""
import matplotlib
import numpy as np
import pytest

from tlalign_mm.analysis import figures

matplotlib.use('Agg')


@pytest.fixture
def kept(monkeypatch):
    """The figures a plot function draws, kept open after it saved them
    (the functions close what they draw)."""
    import matplotlib.pyplot as plt
    close, before = plt.close, set(plt.get_fignums())
    monkeypatch.setattr(plt, 'close', lambda *args: None)
    yield lambda: [plt.figure(n) for n in plt.get_fignums()
                   if n not in before]
    for n in set(plt.get_fignums()) - before:
        close(n)


def outside(fig) -> list:
    """The axes of ``fig`` whose drawn texts (title, axis labels, the tick
    labels drawn, legend) reach past the figure's edges (a pixel of slack),
    by title; and the figure's own texts that do."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox

    def out(ext):
        return ext.x0 < box.x0 - 1 or ext.y0 < box.y0 - 1 or \
            ext.x1 > box.x1 + 1 or ext.y1 > box.y1 + 1

    cut = [ax.get_title() or ax.get_xlabel() for ax in fig.axes
           if out(ax.get_tightbbox(renderer))]
    return cut + [t.get_text() for t in fig.texts
                  if t.get_visible() and out(t.get_window_extent(renderer))]


def legend_texts(ax) -> list:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text()
                                      for t in legend.get_texts()]


def main_job_picture(tmp_path, intervals=True):
    seeds = range(5)
    rng = np.random.default_rng(0)
    accuracy, curves, titles = {}, {}, {}
    for model in ('ViT', 'SL-ViT, a long row name'):
        accuracy[model] = {t: {s: 90 + rng.normal() for s in seeds}
                           for t in ('CutMix', 'TL-Align')}
        curves[model] = {t: (list(range(2, 31, 2)),
                             90 + rng.normal(size=(5, 15)))
                         for t in ('CutMix', 'TL-Align')}
        titles[model] = (f'{model}, 5 seeds\nTL-Align − CutMix: -0.28 '
                         '[-1.31, +0.75]\nW/L/T 1/3/1')
    rows = [dict(label='SL-ViT, this job\n(5 seeds)', mean=-0.28,
                 ci=(-1.31, 0.75), recorded=False),
            dict(label='SL-ViT, recorded\n(20 seeds)', mean=-0.25,
                 ci=(-0.61, 0.11), recorded=True)]
    return figures.seed_comparison(
        accuracy, curves, str(tmp_path / 'summary.png'), titles=titles,
        intervals=rows if intervals else None)


@pytest.mark.parametrize('intervals', [True, False])
def test_main_job_picture_keeps_its_text_and_explains_its_lines(
        tmp_path, kept, intervals):
    main_job_picture(tmp_path, intervals)
    fig, = kept()
    assert outside(fig) == []
    axes = fig.axes
    dots, curves = axes[0], axes[1]
    # the pairing lines and the mean bars, then every curve and its band
    assert legend_texts(dots) == [
        'a seed, TL-Align higher', 'a seed, TL-Align lower', 'a seed, tied',
        'mean']
    assert legend_texts(curves) == ['CutMix, mean of 5', 'CutMix, ±1 sd',
                                    'TL-Align, mean of 5', 'TL-Align, ±1 sd']
    assert len(curves.collections) == 2  # the two bands, both named
    if intervals:
        assert len(axes) == 5
        assert legend_texts(axes[-1]) == [
            'this job: mean, 95% CI', 'recorded: mean, 95% CI',
            'no difference from CutMix']
        assert [t.get_text() for t in axes[-1].get_yticklabels()] == [
            'SL-ViT, this job\n(5 seeds)', 'SL-ViT, recorded\n(20 seeds)']
    else:
        assert len(axes) == 4
