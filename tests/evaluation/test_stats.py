"""Statistics: paired t-test and Fisher randomization test, Holm correction, bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from evalkit.core.errors import KitError, RequestError
from evalkit.evaluation import stats
from evalkit.evaluation.compare import compare

FIVE = ["q1", "q2", "q3", "q4", "q5"]


def test_paired_test_by_hand():
    a = pd.Series([0.5, 0.7, 0.2, 0.9, 0.4], index=FIVE)
    b = pd.Series([0.4, 0.5, 0.3, 0.6, 0.4], index=FIVE)
    # d = 0.1, 0.2, -0.1, 0.3, 0.0; mean 0.1; deviations 0, 0.1, -0.2, 0.2, -0.1; squares sum 0.10
    # sd = sqrt(0.10/4) = 0.158114; t = 0.1 / (0.158114/sqrt(5)) = 1.414214
    t = 0.1 / (math.sqrt(0.10 / 4) / math.sqrt(5))
    p = 2 * scipy_stats.t.sf(abs(t), df=4)
    result = stats.paired_test(a, b)
    assert (result.n, result.note) == (5, None)
    assert result.delta == pytest.approx(0.1, rel=1e-12)
    assert result.statistic == pytest.approx(1.414214, abs=1e-6) and result.statistic == pytest.approx(t)
    assert result.pvalue == pytest.approx(p, rel=1e-10)
    assert result.pvalue == pytest.approx(scipy_stats.ttest_rel(a, b).pvalue, rel=1e-12)
    swapped = stats.paired_test(b, a)
    assert swapped.statistic == pytest.approx(-t) and swapped.delta == pytest.approx(-0.1)


def test_paired_test_pairs_by_query_and_drops_missing():
    a = pd.Series([0.9, 0.5, 0.7, 0.2, 0.4, 0.8, 0.1], index=["q4", "q1", "q2", "q3", "q5", "q6", "q7"])
    b = pd.Series([0.4, 0.5, 0.3, 0.6, 0.4, math.nan], index=[*FIVE, "q7"])
    result = stats.paired_test(a, b)
    assert result.n == 5 and result.delta == pytest.approx(0.1)
    assert result.statistic == pytest.approx(0.1 / (math.sqrt(0.10 / 4) / math.sqrt(5)))


def test_no_p_value_on_few_queries_or_no_variance():
    a = pd.Series([0.3, 0.6, 0.1, 0.2], index=FIVE[:4])
    few = stats.paired_test(a, a - 0.1)
    assert math.isnan(few.pvalue) and math.isnan(few.statistic) and few.delta == pytest.approx(0.1)
    assert few.note == "no test on 4 paired queries; it needs 5"
    five = pd.Series([0.3, 0.6, 0.1, 0.2, 0.5], index=FIVE)
    for other, delta in ((five.copy(), 0.0), (five - 0.25, 0.25)):  # identical; a constant shift (t = x/0)
        flat = stats.paired_test(five, other)
        assert math.isnan(flat.pvalue) and "no variance" in flat.note and flat.delta == pytest.approx(delta)
    none = stats.paired_test(five, pd.Series([0.1], index=["other"]))
    assert none.n == 0 and "no query" in none.note and math.isnan(none.delta)


def test_groups_make_one_unit_of_a_seeds_queries():
    """p-MRR: a seed's two facets are one unit; delta and t are over the seeds' mean differences."""
    index = [f"s{i}_{f}" for i in range(5) for f in ("background", "method")]
    a = pd.Series([0.1, 0.3, 0.2, 0.2, 0.5, 0.1, 0.0, 0.4, 0.3, 0.3], index=index)
    b = pd.Series(0.0, index=index)
    groups = {q: q.split("_")[0] for q in index}
    per_seed = [0.2, 0.2, 0.3, 0.2, 0.3]
    result = stats.paired_test(a, b, groups=groups)
    assert result.n == 5 and result.delta == pytest.approx(0.24)
    assert result.pvalue == pytest.approx(scipy_stats.ttest_1samp(per_seed, 0.0).pvalue)
    assert stats.paired_test(a, b).n == 10  # without groups: ten queries (not independent)


def test_fisher_randomization_is_seeded_and_near_the_exact_permutation_p():
    import itertools

    a = pd.Series([0.5, 0.7, 0.2, 0.9, 0.4, 0.8, 0.3], index=[f"q{i}" for i in range(7)])
    b = pd.Series([0.4, 0.5, 0.3, 0.6, 0.4, 0.5, 0.1], index=a.index)
    diff = (a - b).to_numpy()
    flips = [abs((np.array(s) * diff).mean()) >= abs(diff.mean()) - 1e-12
             for s in itertools.product([-1, 1], repeat=len(diff))]
    exact = sum(flips) / len(flips)  # all 128 sign flips
    first = stats.paired_test(a, b, "fisher", permutations=20_000, seed=1)
    assert first == stats.paired_test(a, b, "fisher", permutations=20_000, seed=1)
    assert first.pvalue == pytest.approx(exact, abs=0.01) and first.delta == pytest.approx(diff.mean())
    with pytest.raises(KitError, match="test="):
        stats.paired_test(a, b, "wilcoxon")


def test_the_sign_of_delta_is_the_sign_of_t():
    """Property, on 500 random pairs of per-query values (5 to 40 queries; coarse values, so
    ties and zero differences occur)."""
    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(5, 41))
        index = [f"q{i}" for i in range(n)]
        a = pd.Series(rng.integers(0, 6, n) / 5, index=index)
        b = pd.Series(rng.integers(0, 6, n) / 5, index=index)
        result = stats.paired_test(a, b)
        assert result.delta == pytest.approx((a - b).mean(), abs=1e-12)
        if not math.isnan(result.statistic):
            assert np.sign(result.delta) == np.sign(result.statistic)


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
    from evalkit.evaluation.stats import holm, interval_or_nan, paired_test

    one = pd.Series({"q1": 0.5})
    assert math.isnan(paired_test(one, pd.Series({"q1": 0.2})).pvalue)
    assert all(math.isnan(v) for v in interval_or_nan(one))
    a = pd.Series({"q1": 0.1, "q2": 0.4, "q3": 0.3, "q4": 0.9, "q5": 0.2})
    b = pd.Series({"q1": 0.2, "q2": 0.1, "q3": 0.5, "q4": 0.4, "q5": 0.2})
    assert not math.isnan(paired_test(a, b).pvalue)
    assert math.isnan(paired_test(a.iloc[:4], b.iloc[:4]).pvalue)
    # Holm over the defined p-values only: 0.01 and 0.04 with m = 2, the NaN left as it is
    adjusted = holm({"x": 0.04, "y": math.nan, "z": 0.01})
    assert adjusted["z"] == pytest.approx(0.02) and adjusted["x"] == pytest.approx(0.04) and math.isnan(adjusted["y"])


def test_fishers_test_draws_in_chunks_as_in_one_draw(monkeypatch):
    """The sign flips are drawn chunk after chunk from one generator: the p-value does not depend
    on the chunk size (so bounding memory changed no published figure)."""
    diff = np.random.default_rng(0).normal(size=7)
    found = set()
    for chunk in (7, 21, 70, 7 * 333, stats.SIGN_FLIPS_PER_CHUNK):
        monkeypatch.setattr(stats, "SIGN_FLIPS_PER_CHUNK", chunk)
        found.add(stats._randomization_p(diff, float(diff.mean()), 1001, 3))
    assert len(found) == 1


def test_the_documented_maximum_of_permutations_runs_in_bounded_memory():
    """10,000,000 permutations (`MAX_PERMUTATIONS`) of six queries: drawn at once that is 480 MB of
    signs and as much again for their products; in chunks the peak stays near 100 MB."""
    import tracemalloc

    from evalkit.evaluation.stats import MAX_PERMUTATIONS, check_test

    settings = check_test("fisher", permutations=MAX_PERMUTATIONS)
    index = [f"q{i}" for i in range(6)]
    a = pd.Series([0.5, 0.7, 0.2, 0.9, 0.4, 0.8], index=index)
    b = pd.Series([0.4, 0.5, 0.3, 0.6, 0.4, 0.5], index=index)
    tracemalloc.start()
    try:
        found = stats.paired_test(a, b, settings.test, permutations=settings.permutations, seed=settings.seed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0 < found.pvalue < 1 and peak < 200 * 2**20, peak


@pytest.mark.parametrize("kwargs", [{"permutations": 3}, {"permutations": 0}, {"permutations": True},
                                    {"permutations": 1.5}, {"seed": -1}, {"seed": "7"}])
def test_a_direct_call_is_refused_by_the_requests_one_rule(kwargs):
    """`paired_test` and `compare` called directly refuse Fisher's options with the very line the
    request's rule (`check_test`) gives every front end: one rule, not a guard of their own."""
    from evalkit.evaluation.compare import compare

    a = pd.Series([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], index=list("abcdef"))
    with pytest.raises(RequestError) as rule:
        stats.check_test("fisher", **kwargs)
    with pytest.raises(RequestError) as direct:
        stats.paired_test(a, a * 0.5, "fisher", **kwargs)
    assert str(direct.value) == str(rule.value)
    with pytest.raises(RequestError) as compared:
        compare(None, {"x": pd.DataFrame(), "y": pd.DataFrame()}, ["nDCG@10"], test="fisher", **kwargs)
    assert str(compared.value) == str(rule.value)


def test_compare_checks_alpha_and_adjust_by_the_rules():
    for kwargs, line in (({"alpha": 1.5}, "alpha=1.5: give a significance level"),
                         ({"alpha": float("nan")}, "alpha=nan: give a significance level"),
                         ({"adjust": "bonferroni"}, "adjust='bonferroni': choose holm or none")):
        with pytest.raises(RequestError, match=line):
            compare(None, {"x": pd.DataFrame(), "y": pd.DataFrame()}, ["nDCG@10"], **kwargs)
