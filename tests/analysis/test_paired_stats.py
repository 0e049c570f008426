"""The main job's statistics against a hand computation."""
import math

import pytest

from tlalign_mm.analysis import paired_stats
from tlalign_mm.analysis.paired_stats import paired_difference, t_interval

# Four seeds. CutMix 90, 92, 94, 91; TL-Align 91, 92, 93, 95 (given out of
# order: pairing is by seed).
CUTMIX = {0: 90.0, 1: 92.0, 2: 94.0, 3: 91.0}
TLALIGN = {3: 95.0, 1: 92.0, 0: 91.0, 2: 93.0}
# By hand: differences 1, 0, -1, 4; mean 1; squared deviations 0, 1, 4, 9,
# sample variance 14/3; standard error sqrt(14/3)/2; t_{0.975, 3} =
# 3.182446305284263 (tables: 3.182).
HALF = 3.182446305284263 * math.sqrt(14 / 3) / 2


def test_paired_difference_by_hand():
    d = paired_difference(CUTMIX, TLALIGN)
    assert (d.seeds, d.diffs) == ((0, 1, 2, 3), (1.0, 0.0, -1.0, 4.0))
    assert (d.mean, d.std) == pytest.approx((1.0, math.sqrt(14 / 3)))
    assert d.ci == pytest.approx((1.0 - HALF, 1.0 + HALF))
    assert (d.wins, d.losses, d.ties) == (2, 1, 1)
    # deviations -1.75, 0.25, 2.25, -0.75: sum of squares 8.75, / 3
    assert (d.baseline.mean, d.baseline.std, d.baseline.n) == pytest.approx(
        (91.75, math.sqrt(8.75 / 3), 4))
    assert d.treatment.mean == pytest.approx(92.75)
    # t = 1 / (sqrt(14/3)/2) = 0.9258; two-sided p of t(3) there is 0.4229
    # (scipy; between the tables' 0.765 for p=0.5 and 0.978 for p=0.4)
    assert d.p_value == pytest.approx(0.42289, abs=1e-4)
    narrow, wide = (t_interval(d.diffs, confidence=c) for c in (0.5, 0.99))
    assert wide[0] < narrow[0] < 1 < narrow[1] < wide[1]


def test_one_seed_has_no_interval_and_unpaired_seeds_are_refused():
    d = paired_difference({0: 90.0}, {0: 91.0})
    assert d.mean == 1.0 and (d.wins, d.losses, d.ties) == (1, 0, 0)
    assert all(math.isnan(v) for v in (*d.ci, d.wilcoxon_p,
                                       paired_stats.spread([3.0]).std))
    with pytest.raises(ValueError, match=r'only baseline has \[3\]'):
        paired_difference(CUTMIX, {s: TLALIGN[s] for s in (0, 1, 2)})
    with pytest.raises(ValueError, match='No seeds'):
        paired_difference({}, {})
    with pytest.raises(ValueError, match='confidence'):
        t_interval([1, 2], confidence=1.5)
    # every seed tied: no difference, p 1 (scipy's t-test says nan)
    tied = paired_difference({0: 90.0, 1: 91.0}, {0: 90.0, 1: 91.0})
    assert (tied.p_value, tied.ci) == (1.0, (0.0, 0.0))


@pytest.mark.parametrize('changes,p', [
    # five seeds won, seed 0 tied (dropped): W = 0, exact p = 2 / 2**5
    ({s: 90.0 + s for s in range(1, 6)}, 0.0625),
    ({s: 90.0 - s for s in range(1, 6)}, 0.0625),  # all lost: the same
    ({}, 1.0),  # no change at all
    # one loss of rank 1 among wins of ranks 2..5: W- = 1, exact two-sided
    # p = 2 * P(W <= 1) = 2 * 2 / 32
    ({1: 89.0, 2: 92.0, 3: 93.0, 4: 94.0, 5: 95.0}, 0.125),
])
def test_wilcoxon_by_hand(changes, p):
    base = {s: 90.0 for s in range(6)}
    assert paired_difference(base, {**base, **changes}).wilcoxon_p == \
        pytest.approx(p)
