"""`evalkit.evaluation.aggregate`: plain and fold means, and the per-stratum summary (hand computations)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evalkit.evaluation import aggregate


def _tiny_table() -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    rows = [
        # qid, facet, fold, ndcg, p-mrr
        ("q1", "background", "fold1", 0.2, 0.5),
        ("q2", "background", "fold1", 0.4, math.nan),
        ("q3", "background", "fold2", 0.9, -0.1),
        ("q4", "method", "fold1", 1.0, 0.3),
        ("q5", "method", "fold2", 0.0, math.nan),
        ("q6", "method", "fold2", 0.5, math.nan),
        ("q7", "result", "fold1", 0.6, -0.4),
        ("q8", "result", "fold2", 0.6, 0.1),
        ("q9", "result", "fold2", 0.3, math.nan),
    ]
    table = pd.DataFrame([(q, n, p) for q, _, _, n, p in rows], columns=["qid", "nDCG@20", "p-MRR"]).set_index("qid")
    strata = {q: facet for q, facet, _, _, _ in rows}
    folds = {q: fold for q, _, fold, _, _ in rows}
    return table, strata, folds


def test_plain_mean_skips_nan():
    assert aggregate.plain_mean([0.2, math.nan, 0.4]) == pytest.approx(0.3)
    assert aggregate.plain_mean(pd.Series([1.0, 0.0])) == 0.5
    assert math.isnan(aggregate.plain_mean([]))
    assert math.isnan(aggregate.plain_mean([math.nan]))


def test_fold_mean_differs_from_plain_mean():
    t, _, folds = _tiny_table()
    # fold1 = 0.2, 0.4, 1.0, 0.6 -> 2.2/4 = 0.55; fold2 = 0.9, 0.0, 0.5, 0.6, 0.3 -> 2.3/5 = 0.46
    # fold mean = (0.55 + 0.46)/2 = 0.505; plain mean = 4.5/9 = 0.5
    assert aggregate.fold_mean(t["nDCG@20"], folds) == pytest.approx(0.505, abs=1e-15)
    assert aggregate.plain_mean(t["nDCG@20"]) == pytest.approx(0.5, abs=1e-15)
    assert math.isnan(aggregate.fold_mean(pd.Series([], dtype=float), {}))


def test_fold_mean_skips_nan_values_empty_folds_and_queries_in_no_test_fold():
    values = pd.Series({"a": 0.2, "b": math.nan, "c": 0.6, "d": math.nan, "e": 9.0, "f": 9.0})
    folds = {"a": "f1", "b": "f1", "c": "f2", "d": "f3", "e": None}  # f: absent, e: no test fold
    # f1: 0.2 (b skipped); f2: 0.6; f3: only NaN -> dropped; mean (0.2 + 0.6)/2
    assert aggregate.fold_mean(values, folds) == pytest.approx(0.4)
    assert math.isnan(aggregate.fold_mean(pd.Series({"a": math.nan}), {"a": "f1"}))


def test_summarize_folds_and_mean():
    t, strata, folds = _tiny_table()
    by_folds = aggregate.summarize(t, strata, folds, ["p-MRR"])
    # background: ((0.2 + 0.4)/2 + 0.9)/2 = 0.6; method: (1.0 + (0.0 + 0.5)/2)/2 = 0.625
    # result: (0.6 + (0.6 + 0.3)/2)/2 = 0.525; all: 0.505 (above)
    assert by_folds["nDCG@20"] == pytest.approx({"background": 0.6, "method": 0.625, "result": 0.525, "all": 0.505})
    plain = aggregate.summarize(t, strata, None, ["p-MRR"])
    # background 1.5/3, method 1.5/3, result 1.5/3, all 4.5/9
    assert plain["nDCG@20"] == pytest.approx({"background": 0.5, "method": 0.5, "result": 0.5, "all": 0.5})
    # p-MRR, same either way: background (0.5 - 0.1)/2 = 0.2, method 0.3, result (-0.4 + 0.1)/2 = -0.15;
    # all = mean of the stratum means (0.2 + 0.3 - 0.15)/3 = 0.35/3, not the pooled mean (0.4/5 = 0.08)
    expected = {"background": 0.2, "method": 0.3, "result": -0.15, "all": 0.35 / 3}
    assert by_folds["p-MRR"] == pytest.approx(expected) and plain["p-MRR"] == pytest.approx(expected)
    assert set(by_folds) == {"nDCG@20", "p-MRR"}
    assert list(by_folds["nDCG@20"]) == ["background", "method", "result", "all"]  # strata order, then all


def test_summarize_p_mrr_all_skips_strata_without_pairs():
    t, strata, folds = _tiny_table()
    t.loc[[q for q in t.index if strata[q] == "result"], "p-MRR"] = math.nan
    pmrr = aggregate.summarize(t, strata, folds, ["p-MRR"])["p-MRR"]
    assert math.isnan(pmrr["result"])
    assert pmrr["all"] == pytest.approx((0.2 + 0.3) / 2)


def test_summarize_pmrr_column_name_and_no_strata():
    t, _, folds = _tiny_table()
    t = t.rename(columns={"p-MRR": "p-mrr"})
    # without strata: only "all"; p-MRR then is the plain mean over the queries with a value
    summary = aggregate.summarize(t, {}, folds, strata_mean=["p-mrr"])
    assert summary == {"nDCG@20": {"all": pytest.approx(0.505)}, "p-mrr": {"all": pytest.approx(0.4 / 5)}}
    # not named in strata_mean it counts as a ranking measure, by fold mean:
    # fold1 (0.5 + 0.3 - 0.4)/3, fold2 (-0.1 + 0.1)/2 -> (0.4/3 + 0)/2
    assert aggregate.summarize(t, {}, folds)["p-mrr"]["all"] == pytest.approx(0.2 / 3)


def test_summarize_strata_without_queries_extra_queries_and_text_columns():
    t, strata, folds = _tiny_table()
    t["facet"] = [strata[q] for q in t.index]  # a text column: ignored
    extra = pd.DataFrame({"nDCG@20": [1.0], "p-MRR": [math.nan], "facet": ["none"]}, index=["q10"])
    t = pd.concat([t, extra])
    strata = dict(strata, q11="other")  # a stratum none of the table's queries belongs to
    summary = aggregate.summarize(t, strata, None, ["p-MRR"])
    assert set(summary) == {"nDCG@20", "p-MRR"}
    assert math.isnan(summary["nDCG@20"]["other"]) and math.isnan(summary["p-MRR"]["other"])
    assert summary["nDCG@20"]["background"] == pytest.approx(0.5)
    assert summary["nDCG@20"]["all"] == pytest.approx(5.5 / 10)  # q10 (no stratum) counts in "all" only
