"""The analysis tools' figures keep their text (issue 41): titles and tick
labels inside the figure (long config and checkpoint names were cut at its
edge), and every line and band in a legend (mixing_ratio.png's band of the
similarity ratio was not)."""
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tlalign_mm.analysis import figures

NAMES = ['deit-small_4xb256-tlalign_in1k (epoch_300)',
         'deit-small_4xb256-cutmix_in1k (epoch_300)',
         'swin-tiny_16xb64-tlalign_in1k (epoch_300)']


@pytest.fixture
def drawn(monkeypatch):
    """The figures the functions save (after saving them)."""
    saved, save = [], figures._save

    def keep(fig, path, dpi=100):
        saved.append(fig)
        return save(fig, path, dpi)
    monkeypatch.setattr(figures, '_save', keep)
    return saved


def _inside(fig) -> None:
    """Everything drawn (tight bounding box, inches) is on the canvas."""
    canvas = FigureCanvasAgg(fig)  # the saved figure, closed: drawn again
    canvas.draw()
    box = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    assert box.x0 >= -0.01 and box.y0 >= -0.01, box
    assert box.x1 <= width + 0.01 and box.y1 <= height + 0.01, box


def _legend_labels(fig) -> set:
    legends = fig.legends + [ax.get_legend() for ax in fig.axes
                             if ax.get_legend()]
    return {t.get_text() for legend in legends for t in legend.get_texts()}


@pytest.mark.parametrize('count', [1, 3])
def test_label_rmse_keeps_its_names_and_title(drawn, tmp_path, count):
    figures.rmse_bars(NAMES[:count], [0.0123, 0.0456, 0.0312][:count],
                      str(tmp_path / 'label_rmse.png'))
    _inside(drawn[0])


def test_mixing_ratio_keeps_its_text_and_names_every_line_and_band(
        drawn, tmp_path):
    x = np.linspace(0.3, 0.6, 12)
    figures.mixing_ratio_lines(
        dict(similarity=x, tlalign=x + 0.02, cutmix=np.full(12, 0.4),
             transmix=x - 0.03), str(tmp_path / 'mixing_ratio.png'),
        spread=np.full(12, 0.1))
    fig = drawn[0]
    _inside(fig)
    (ax, ) = fig.axes
    drawn_labels = {a.get_label() for a in ax.lines + ax.collections}
    assert len(drawn_labels) == 5  # 4 lines and the band
    assert drawn_labels <= _legend_labels(fig)
