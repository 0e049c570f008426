"""Paired comparison of two training targets over seeds (the main job's
statistics).

Runs with the same seed share the initial weights, the data order and the
mixing draws: only the target differs, so the per-seed difference
``treatment - baseline`` removes the spread both share and a paired
interval is the honest one. Given: each target's mean and sample std
(``ddof=1``); the difference's mean, std, Student-t interval ``mean +-
t_{(1+c)/2, n-1} * sd / sqrt(n)`` and paired t-test p-value (scipy's
``ttest_1samp``; they assume roughly normal differences, which a handful
of seeds cannot check); the
Wilcoxon signed-rank p-value (scipy's; no normality assumed); and the
wins, losses and ties (within ``tie_tol``).
"""
import math
from typing import Iterable, Mapping, NamedTuple, Sequence, Tuple

import numpy as np


class Spread(NamedTuple):
    """Mean and sample standard deviation (``nan`` for one value)."""
    mean: float
    std: float
    n: int


class PairedDifference(NamedTuple):
    """``treatment - baseline`` over the (sorted) ``seeds`` both have: the
    ``diffs`` in seed order, their ``mean`` and ``std`` (``ddof=1``), the
    paired-t interval ``ci`` at level ``confidence`` and p-value (``nan``
    with fewer than two seeds), the Wilcoxon p-value (1 when every
    difference is zero, ``nan`` for one seed), and the win/loss/tie
    counts."""
    seeds: Tuple[int, ...]
    baseline: Spread
    treatment: Spread
    diffs: Tuple[float, ...]
    mean: float
    std: float
    ci: Tuple[float, float]
    confidence: float
    p_value: float
    wilcoxon_p: float
    wins: int
    losses: int
    ties: int

    def to_dict(self) -> dict:
        return {k: v._asdict() if isinstance(v, Spread) else
                list(v) if isinstance(v, tuple) else v
                for k, v in self._asdict().items()}


def spread(values: Iterable[float]) -> Spread:
    """Mean and sample standard deviation of ``values``."""
    values = np.asarray(list(values), dtype=np.float64)
    if values.size == 0:
        raise ValueError('spread() needs at least one value.')
    std = float(values.std(ddof=1)) if values.size > 1 else math.nan
    return Spread(float(values.mean()), std, int(values.size))


def t_interval(diffs: Sequence[float],
               confidence: float = 0.95) -> Tuple[float, float, float]:
    """``(low, high, p_value)``: the Student-t interval of the mean of
    ``diffs`` and the two-sided p-value of a zero mean
    (``scipy.stats.ttest_1samp``); differences that are all zero have p 1
    (scipy: nan)."""
    from scipy import stats
    if not 0 < confidence < 1:
        raise ValueError(f'confidence must be in (0, 1), got {confidence}.')
    diffs = np.asarray(diffs, dtype=np.float64)
    if diffs.size < 2:
        return math.nan, math.nan, math.nan
    test = stats.ttest_1samp(diffs, 0.0)
    low, high = test.confidence_interval(confidence)
    p_value = 1.0 if not diffs.any() else float(test.pvalue)
    return float(low), float(high), p_value


def wilcoxon_p(diffs: Sequence[float], tie_tol: float = 1e-6) -> float:
    """Two-sided p-value of scipy's Wilcoxon signed-rank test of
    ``diffs``; differences within ``tie_tol`` of zero count as zero (and
    are dropped, scipy's default ``zero_method``)."""
    from scipy import stats
    diffs = np.asarray(diffs, dtype=np.float64)
    if diffs.size < 2:
        return math.nan
    diffs = np.where(np.abs(diffs) <= tie_tol, 0.0, diffs)
    if not diffs.any():
        return 1.0
    return float(stats.wilcoxon(diffs).pvalue)


def paired_difference(baseline: Mapping[int, float],
                      treatment: Mapping[int, float],
                      confidence: float = 0.95,
                      tie_tol: float = 1e-6) -> PairedDifference:
    """Compare two targets run on the same seeds.

    ``baseline``, ``treatment``: seed -> accuracy (e.g. CutMix, TL-Align);
    differences within ``tie_tol`` are ties (accuracies on a fixed test set
    are discrete: equal counts of correct images give equal floats).
    """
    if set(baseline) != set(treatment):
        raise ValueError(
            'Paired statistics need the same seeds for both targets; only '
            f'baseline has {sorted(set(baseline) - set(treatment))}, only '
            f'treatment has {sorted(set(treatment) - set(baseline))}. Run '
            'the missing seeds or leave them out of both.')
    if not baseline:
        raise ValueError('No seeds to compare.')
    seeds = tuple(sorted(baseline))
    diffs = np.array([treatment[s] - baseline[s] for s in seeds],
                     dtype=np.float64)
    low, high, p_value = t_interval(diffs, confidence)
    d = spread(diffs)
    return PairedDifference(
        seeds=seeds, baseline=spread([baseline[s] for s in seeds]),
        treatment=spread([treatment[s] for s in seeds]),
        diffs=tuple(float(x) for x in diffs), mean=d.mean, std=d.std,
        ci=(low, high), confidence=confidence, p_value=p_value,
        wilcoxon_p=wilcoxon_p(diffs, tie_tol),
        wins=int((diffs > tie_tol).sum()),
        losses=int((diffs < -tie_tol).sum()),
        ties=int((np.abs(diffs) <= tie_tol).sum()))
