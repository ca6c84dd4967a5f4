"""Statistics: paired t-test, Holm correction, bootstrap intervals."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as scipy_stats

from evalkit import stats
from evalkit.errors import KitError


def test_paired_ttest_by_hand():
    a = pd.Series([0.5, 0.7, 0.2, 0.9], index=["q1", "q2", "q3", "q4"])
    b = pd.Series([0.4, 0.5, 0.3, 0.6], index=["q1", "q2", "q3", "q4"])
    # d = 0.1, 0.2, -0.1, 0.3; mean 0.5/4 = 0.125
    # deviations -0.025, 0.075, -0.225, 0.175; squares sum 0.000625 + 0.005625 + 0.050625 + 0.030625 = 0.0875
    # sd = sqrt(0.0875/3) = 0.170783; t = 0.125 / (0.170783/sqrt(4)) = 1.463850
    sd = math.sqrt(0.0875 / 3)
    t = 0.125 / (sd / math.sqrt(4))
    p = 2 * scipy_stats.t.sf(abs(t), df=3)
    result = stats.paired_ttest(a, b)
    assert result.n == 4
    assert result.statistic == pytest.approx(t, rel=1e-12)
    assert result.statistic == pytest.approx(1.463850, abs=1e-6)
    assert result.pvalue == pytest.approx(p, rel=1e-10)
    assert 0.2 < result.pvalue < 0.3  # p = 0.2395...: no significant difference
    swapped = stats.paired_ttest(b, a)
    assert swapped.statistic == pytest.approx(-t, rel=1e-12) and swapped.pvalue == pytest.approx(p, rel=1e-10)


def test_paired_ttest_pairs_by_query_and_drops_missing():
    # same values as above, listed in another order, with one extra and one NaN query that must be dropped
    a = pd.Series([0.9, 0.5, 0.7, 0.2, 0.8, 0.1], index=["q4", "q1", "q2", "q3", "q5", "q6"])
    b = pd.Series([0.4, 0.5, 0.3, 0.6, math.nan], index=["q1", "q2", "q3", "q4", "q6"])
    result = stats.paired_ttest(a, b)
    assert result.n == 4
    assert result.statistic == pytest.approx(0.125 / (math.sqrt(0.0875 / 3) / 2), rel=1e-12)


def test_paired_ttest_identical_inputs_give_p_one():
    a = pd.Series([0.3, 0.6, 0.1], index=["x", "y", "z"])
    result = stats.paired_ttest(a, a.copy())
    assert (result.statistic, result.pvalue, result.n) == (0.0, 1.0, 3)


def test_paired_ttest_needs_two_queries():
    with pytest.raises(KitError, match="at least two queries"):
        stats.paired_ttest(pd.Series([0.1], index=["q"]), pd.Series([0.2], index=["q"]))
    with pytest.raises(KitError, match="at least two queries"):
        stats.paired_ttest(pd.Series([0.1, 0.2], index=["a", "b"]), pd.Series([0.2, 0.3], index=["c", "d"]))


def test_holm_hand_example():
    # sorted: a 0.01 x 3 = 0.03; c 0.03 x 2 = 0.06; b 0.04 x 1 = 0.04 -> raised to 0.06 (monotone)
    adjusted = stats.holm({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adjusted == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert list(adjusted) == ["a", "b", "c"]  # input order kept


def test_holm_caps_at_one_and_keeps_order():
    # 0.4 x 3 = 1.2 -> 1; 0.5 x 2 = 1.0; 0.9 x 1 = 0.9 -> raised to 1
    assert stats.holm({"x": 0.4, "y": 0.5, "z": 0.9}) == {"x": 1.0, "y": 1.0, "z": 1.0}
    # a single comparison is unchanged
    assert stats.holm({"only": 0.02}) == {"only": 0.02}
    adjusted = stats.holm({f"m{i}": p for i, p in enumerate([0.001, 0.2, 0.01, 0.04, 0.03])})
    # m0 0.001 x 5 = 0.005; m2 0.01 x 4 = 0.04; m4 0.03 x 3 = 0.09; m3 0.04 x 2 = 0.08 -> 0.09; m1 0.2 x 1 -> 0.2
    assert adjusted == pytest.approx({"m0": 0.005, "m1": 0.2, "m2": 0.04, "m3": 0.09, "m4": 0.09})


def test_bootstrap_ci_deterministic_and_contains_the_mean():
    values = pd.Series([0.1, 0.5, 0.3, 0.9, 0.4, 0.7, 0.2, 0.6])  # mean 3.7/8 = 0.4625
    low, high = stats.bootstrap_ci(values, n_resamples=2000, seed=5)
    assert (low, high) == stats.bootstrap_ci(values, n_resamples=2000, seed=5)
    assert low < 0.4625 < high
    assert 0.1 <= low and high <= 0.9  # a mean of resamples stays within the data
    assert (low, high) != stats.bootstrap_ci(values, n_resamples=2000, seed=6)
    wide_low, wide_high = stats.bootstrap_ci(values, confidence=0.99, n_resamples=2000, seed=5)
    assert wide_low <= low and high <= wide_high


def test_bootstrap_ci_of_constant_data_is_the_constant():
    assert stats.bootstrap_ci(pd.Series([0.25] * 6)) == (0.25, 0.25)


def test_bootstrap_ci_drops_nan_and_needs_two_values():
    values = pd.Series([0.1, math.nan, 0.5, 0.3])
    assert stats.bootstrap_ci(values, n_resamples=500) == stats.bootstrap_ci(values.dropna(), n_resamples=500)
    with pytest.raises(KitError, match="at least two"):
        stats.bootstrap_ci(pd.Series([0.3, math.nan]))


def test_undefined_tests_are_nan_for_study_tables_and_holm_skips_them():
    from evalkit.stats import holm, interval_or_nan, paired_ttest, pvalue_or_nan

    one = pd.Series({"q1": 0.5})
    assert math.isnan(pvalue_or_nan(one, pd.Series({"q1": 0.2})))
    assert all(math.isnan(v) for v in interval_or_nan(one))
    a, b = pd.Series({"q1": 0.1, "q2": 0.4, "q3": 0.3}), pd.Series({"q1": 0.2, "q2": 0.1, "q3": 0.5})
    assert pvalue_or_nan(a, b) == paired_ttest(a, b).pvalue
    # Holm over the defined p-values only: 0.01 and 0.04 with m = 2, the NaN left as it is
    adjusted = holm({"x": 0.04, "y": math.nan, "z": 0.01})
    assert adjusted["z"] == pytest.approx(0.02) and adjusted["x"] == pytest.approx(0.04) and math.isnan(adjusted["y"])
