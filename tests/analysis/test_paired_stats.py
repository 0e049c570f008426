"""The main job's statistics against a hand computation."""
import math

import pytest

from tlalign_mm.analysis.paired_stats import (
    paired_difference,
    spread,
    t_interval,
)

# Four seeds. CutMix 90, 92, 94, 91; TL-Align 91, 92, 93, 95.
CUTMIX = {0: 90.0, 1: 92.0, 2: 94.0, 3: 91.0}
TLALIGN = {0: 91.0, 1: 92.0, 2: 93.0, 3: 95.0}
# By hand: differences 1, 0, -1, 4; mean 1; squared deviations 0, 1, 4, 9,
# sample variance 14/3; standard error sqrt(14/3)/2; t_{0.975, 3} =
# 3.182446305284263 (tables: 3.182).
T_975_3 = 3.182446305284263
HALF = T_975_3 * math.sqrt(14 / 3) / 2


def test_spread_by_hand():
    s = spread(CUTMIX.values())
    assert s.mean == pytest.approx(91.75)
    # deviations -1.75, 0.25, 2.25, -0.75: sum of squares 8.75, / 3
    assert s.std == pytest.approx(math.sqrt(8.75 / 3))
    assert s.n == 4
    assert math.isnan(spread([3.0]).std)


def test_paired_difference_by_hand():
    d = paired_difference(CUTMIX, TLALIGN)
    assert d.seeds == (0, 1, 2, 3)
    assert d.diffs == (1.0, 0.0, -1.0, 4.0)
    assert d.mean == pytest.approx(1.0)
    assert d.std == pytest.approx(math.sqrt(14 / 3))
    assert d.ci[0] == pytest.approx(1.0 - HALF)
    assert d.ci[1] == pytest.approx(1.0 + HALF)
    assert (d.wins, d.losses, d.ties) == (2, 1, 1)
    assert d.baseline.mean == pytest.approx(91.75)
    assert d.treatment.mean == pytest.approx(92.75)
    # t = 1 / (sqrt(14/3)/2) = 0.9258; two-sided p of t(3) at 0.9258 is
    # 0.4229 (scipy; between the tables' 0.765 for p=0.5 and 0.978 for
    # p=0.4)
    assert 0.4 < d.p_value < 0.5
    assert d.p_value == pytest.approx(0.42289, abs=1e-4)


def test_interval_level_and_order_of_seeds():
    narrow = t_interval([1, 0, -1, 4], confidence=0.5)
    wide = t_interval([1, 0, -1, 4], confidence=0.99)
    assert wide[0] < narrow[0] < 1 < narrow[1] < wide[1]
    # pairing is by seed, not by order of insertion
    shuffled = {3: 95.0, 1: 92.0, 0: 91.0, 2: 93.0}
    assert paired_difference(CUTMIX, shuffled).diffs == (1.0, 0.0, -1.0,
                                                         4.0)


def test_one_seed_has_no_interval():
    d = paired_difference({0: 90.0}, {0: 91.0})
    assert d.mean == 1.0 and (d.wins, d.losses, d.ties) == (1, 0, 0)
    assert math.isnan(d.ci[0]) and math.isnan(d.ci[1])


def test_unpaired_seeds_are_refused():
    with pytest.raises(ValueError, match=r'only baseline has \[3\]'):
        paired_difference(CUTMIX, {s: TLALIGN[s] for s in (0, 1, 2)})
    with pytest.raises(ValueError, match='No seeds'):
        paired_difference({}, {})
    with pytest.raises(ValueError, match='confidence'):
        t_interval([1, 2], confidence=1.5)


def test_wilcoxon_by_hand():
    """Five seeds, all won: the signed-rank statistic is 0, whose exact
    two-sided probability is 2 / 2**5; a tied seed is dropped; no change at
    all is p = 1."""
    base = {s: 90.0 for s in range(6)}
    won = {**base, **{s: 90.0 + s for s in range(1, 6)}}  # seed 0 ties
    assert paired_difference(base, won).wilcoxon_p == pytest.approx(0.0625)
    lost = {s: 2 * 90.0 - v for s, v in won.items()}
    assert paired_difference(base, lost).wilcoxon_p == pytest.approx(0.0625)
    assert paired_difference(base, base).wilcoxon_p == 1.0
    one = paired_difference({0: 1.0}, {0: 2.0})
    assert one.wilcoxon_p != one.wilcoxon_p  # nan
    # one loss of rank 1 among wins of ranks 2..5: W- = 1, exact two-sided
    # p = 2 * P(W <= 1) = 2 * 2 / 32
    mixed = {**base, 1: 89.0, 2: 92.0, 3: 93.0, 4: 94.0, 5: 95.0}
    assert paired_difference(base, mixed).wilcoxon_p == pytest.approx(0.125)
