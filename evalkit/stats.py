"""Significance and uncertainty over per-query values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from evalkit.errors import KitError


@dataclass(frozen=True)
class TTest:
    statistic: float
    pvalue: float
    n: int


def paired_ttest(a: pd.Series, b: pd.Series) -> TTest:
    """Two-sided paired t-test over the queries both series hold (scipy.stats.ttest_rel)."""
    both = _held_by_both(a, b)
    if len(both) < 2:
        raise KitError("paired t-test needs at least two queries scored by both models")
    a_values, b_values = both.iloc[:, 0].to_numpy(), both.iloc[:, 1].to_numpy()
    if np.array_equal(a_values, b_values):
        return TTest(0.0, 1.0, len(both))  # identical rankings: no difference, scipy would give NaN
    result = stats.ttest_rel(a_values, b_values)
    return TTest(float(result.statistic), float(result.pvalue), len(both))


def bootstrap_ci(
    values: pd.Series, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over queries; deterministic for a seed."""
    data = pd.Series(values).dropna().to_numpy(dtype=float)
    if len(data) < 2:
        raise KitError("a bootstrap interval needs at least two query values")
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    result = stats.bootstrap(
        (data,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
        method="percentile", random_state=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def pvalue_or_nan(a: pd.Series, b: pd.Series) -> float:
    """`paired_ttest`'s p-value, NaN where it is undefined (fewer than two queries hold both:
    a study table over a one-query smoke run shows a blank, not an error)."""
    return paired_ttest(a, b).pvalue if len(_held_by_both(a, b)) >= 2 else float("nan")


def _held_by_both(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The queries both series score, as two columns."""
    return pd.concat([a, b], axis=1, join="inner").dropna()


def interval_or_nan(values: pd.Series, seed: int = 0) -> tuple[float, float]:
    """`bootstrap_ci`, (NaN, NaN) where it is undefined (fewer than two values)."""
    return bootstrap_ci(values, seed=seed) if len(pd.Series(values).dropna()) >= 2 else (float("nan"), float("nan"))


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); an undefined (NaN)
    p-value stays NaN and does not count among the tests."""
    defined = {name: p for name, p in pvalues.items() if not math.isnan(p)}
    order = sorted(defined, key=lambda name: (defined[name], name))
    m, running, adjusted = len(order), 0.0, {}
    for i, name in enumerate(order):
        running = max(running, min(1.0, (m - i) * defined[name]))
        adjusted[name] = running
    return {name: adjusted.get(name, math.nan) for name in pvalues}
