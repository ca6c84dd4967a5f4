"""Evaluation on CSFCube: the official SPECTER figures, order independence, aggregation, run checks, Human."""

from __future__ import annotations

import math
import random
from math import log2

import numpy as np
import pandas as pd
import pytest

from evalkit import evaluation, human, metrics, runs
from evalkit.errors import KitError

OFFICIAL_SPECTER = {"background": 0.6624, "method": 0.3765, "result": 0.5643, "all": 0.5314}


def _shuffled(run: runs.Run, seed: int) -> runs.Run:
    rng = random.Random(seed)
    out = {}
    for qid in rng.sample(list(run), len(run)):
        items = list(run[qid].items())
        rng.shuffle(items)
        out[qid] = dict(items)
    return out


# --- the official figures ------------------------------------------------------------------


def test_specter_official_ndcg20_csfcube_discount(data, specter):
    summary = evaluation.summarize(evaluation.per_query(data, specter, 20, "csfcube"))
    assert {part: round(v, 4) for part, v in summary["ndcg@20"].items()} == OFFICIAL_SPECTER


def test_specter_trec_discount_differs_from_official(data, specter):
    summary = evaluation.summarize(evaluation.per_query(data, specter, 20, "trec"))
    rounded = {part: round(v, 4) for part, v in summary["ndcg@20"].items()}
    assert rounded == {"background": 0.6644, "method": 0.3814, "result": 0.5682, "all": 0.5350}
    assert all(rounded[p] != OFFICIAL_SPECTER[p] for p in OFFICIAL_SPECTER)


def test_specter_p_mrr_is_zero(data, specter):
    # SPECTER ignores the instruction: the two facets of a seed get the same ranking of a shared pool
    table = evaluation.per_query(data, specter)
    paired = table[table.seed.isin(list(data.paired_seeds))]
    assert len(paired) == 32  # 16 seeds x 2 facets
    # two method queries have no document relevant for method but not for result: nothing to score
    assert sorted(paired.index[paired["p-mrr"].isna()]) == ["174799296_method", "5052952_method"]
    assert (paired["p-mrr"].dropna() == 0.0).sum() == 30
    assert table.loc[~table.seed.isin(list(data.paired_seeds)), "p-mrr"].isna().all()  # 18 unpaired queries
    assert evaluation.summarize(table)["p-mrr"] == {"background": 0.0, "method": 0.0, "result": 0.0, "all": 0.0}


def test_per_query_csfcube_ndcg_equals_a_direct_computation(data, specter):
    qid = "10014168_background"
    query = data.queries[qid]
    order = sorted(specter[qid], key=lambda doc: specter[qid][doc], reverse=True)  # distinct scores
    grades = [query.grades[doc] for doc in order]

    def dcg(gs):
        return sum(g / (1 if r == 1 else log2(r)) for r, g in enumerate(gs[:20], start=1))

    expected = dcg(grades) / dcg(sorted(grades, reverse=True))
    table = evaluation.per_query(data, specter)
    assert table.loc[qid, "ndcg@20"] == pytest.approx(expected, abs=1e-12)
    assert list(table.columns) == ["seed", "facet", "fold", "ndcg@20", "map", "mrr", "p@20", "r@20", "p-mrr"]
    assert list(table.index) == sorted(specter)
    assert table.loc[qid, ["seed", "facet", "fold"]].tolist() == ["10014168", "background", "fold1_test"]


def test_per_query_rejects_unknown_discount(data, specter):
    with pytest.raises(KitError, match="unknown discount 'log'"):
        evaluation.per_query(data, specter, 20, "log")


# --- order independence --------------------------------------------------------------------


@pytest.mark.parametrize("discount", ["csfcube", "trec"])
def test_shuffling_candidates_leaves_every_value_unchanged(data, specter, discount):
    reference = evaluation.per_query(data, specter, 20, discount)
    for seed in (1, 2):
        pd.testing.assert_frame_equal(evaluation.per_query(data, _shuffled(specter, seed), 20, discount), reference)


@pytest.mark.parametrize("discount", ["csfcube", "trec"])
def test_shuffling_a_heavily_tied_run_leaves_every_value_unchanged(data, discount):
    # scores = one annotator's grades: four distinct scores per query, so ties decide most ranks
    tied = human.annotator_run(data, 0)
    reference = evaluation.per_query(data, tied, 20, discount)
    shuffled = evaluation.per_query(data, _shuffled(tied, 3), 20, discount)
    pd.testing.assert_frame_equal(shuffled, reference)
    # and the tie rule matters: ranking ties by id descending instead changes some values
    reversed_ties = {
        qid: {doc: scores[doc] + 1e-9 * i for i, doc in enumerate(sorted(scores))} for qid, scores in tied.items()
    }
    other = evaluation.per_query(data, reversed_ties, 20, discount)
    assert not np.allclose(other["ndcg@20"], reference["ndcg@20"])


# --- p-MRR on the data --------------------------------------------------------------------


def test_p_mrr_of_an_instruction_following_run(data, specter_copy):
    seed = "929877"
    assert data.paired_seeds[seed] == ("background", "method")
    bg, me = data.queries[f"{seed}_background"], data.queries[f"{seed}_method"]
    changed_bg = {d for d, g in bg.grades.items() if g >= 2} - {d for d, g in me.grades.items() if g >= 2}
    changed_me = {d for d, g in me.grades.items() if g >= 2} - {d for d, g in bg.grades.items() if g >= 2}
    assert changed_bg and changed_me
    # background ranking: its own relevant docs first; method ranking: the background-only docs last
    run = specter_copy
    run[bg.qid] = {d: (100.0 if d in changed_bg else 0.0) + s for d, s in run[bg.qid].items()}
    run[me.qid] = {d: (-100.0 if d in changed_bg else 0.0) + s for d, s in run[me.qid].items()}
    table = evaluation.per_query(data, run)
    assert table.loc[bg.qid, "p-mrr"] == pytest.approx(metrics.p_mrr(changed_bg, run[bg.qid], run[me.qid]))
    assert table.loc[me.qid, "p-mrr"] == pytest.approx(metrics.p_mrr(changed_me, run[me.qid], run[bg.qid]))
    assert table.loc[bg.qid, "p-mrr"] > 0.5  # each term is 1 - R_i/R_i' with R_i small and R_i' large
    # every other query keeps SPECTER's value (0, or NaN when unpaired)
    reference = evaluation.per_query(data, {q: s for q, s in run.items() if q not in (bg.qid, me.qid)})
    pd.testing.assert_series_equal(table.drop(index=[bg.qid, me.qid])["p-mrr"], reference["p-mrr"])


def test_p_mrr_is_nan_without_the_other_facet(data, specter_copy):
    del specter_copy["929877_method"]
    table = evaluation.per_query(data, specter_copy)
    assert math.isnan(table.loc["929877_background", "p-mrr"])
    assert table.loc["1791179_background", "p-mrr"] == 0.0


# --- aggregation ---------------------------------------------------------------------------


def _tiny_table() -> pd.DataFrame:
    rows = [
        # qid, facet, fold, ndcg, p-mrr
        ("q1", "background", "fold1_test", 0.2, 0.5),
        ("q2", "background", "fold1_test", 0.4, math.nan),
        ("q3", "background", "fold2_test", 0.9, -0.1),
        ("q4", "method", "fold1_test", 1.0, 0.3),
        ("q5", "method", "fold2_test", 0.0, math.nan),
        ("q6", "method", "fold2_test", 0.5, math.nan),
        ("q7", "result", "fold1_test", 0.6, -0.4),
        ("q8", "result", "fold2_test", 0.6, 0.1),
        ("q9", "result", "fold2_test", 0.3, math.nan),
    ]
    frame = pd.DataFrame(rows, columns=["qid", "facet", "fold", "ndcg@20", "p-mrr"]).set_index("qid")
    frame.insert(0, "seed", [f"s{i}" for i in range(len(frame))])
    return frame


def test_fold_mean_differs_from_plain_mean():
    t = _tiny_table()
    # fold1 = 0.2, 0.4, 1.0, 0.6 -> 2.2/4 = 0.55; fold2 = 0.9, 0.0, 0.5, 0.6, 0.3 -> 2.3/5 = 0.46
    # fold mean = (0.55 + 0.46)/2 = 0.505; plain mean = 4.5/9 = 0.5
    assert evaluation.fold_mean(t["ndcg@20"], t["fold"]) == pytest.approx(0.505, abs=1e-15)
    assert t["ndcg@20"].mean() == pytest.approx(0.5, abs=1e-15)
    assert math.isnan(evaluation.fold_mean(pd.Series([], dtype=float), pd.Series([], dtype=str)))


def test_summarize_folds_and_mean():
    t = _tiny_table()
    folds = evaluation.summarize(t, "folds")
    # background: ((0.2 + 0.4)/2 + 0.9)/2 = 0.6; method: (1.0 + (0.0 + 0.5)/2)/2 = 0.625
    # result: (0.6 + (0.6 + 0.3)/2)/2 = 0.525; all: 0.505 (above)
    assert folds["ndcg@20"] == pytest.approx({"background": 0.6, "method": 0.625, "result": 0.525, "all": 0.505})
    plain = evaluation.summarize(t, "mean")
    # background 1.5/3, method 1.5/3, result 1.5/3, all 4.5/9
    assert plain["ndcg@20"] == pytest.approx({"background": 0.5, "method": 0.5, "result": 0.5, "all": 0.5})
    # p-MRR, same either way: background (0.5 - 0.1)/2 = 0.2, method 0.3, result (-0.4 + 0.1)/2 = -0.15;
    # all = mean of the facet means (0.2 + 0.3 - 0.15)/3 = 0.35/3, not the pooled mean (0.4/5 = 0.08)
    expected = {"background": 0.2, "method": 0.3, "result": -0.15, "all": 0.35 / 3}
    assert folds["p-mrr"] == pytest.approx(expected) and plain["p-mrr"] == pytest.approx(expected)
    assert set(folds) == {"ndcg@20", "p-mrr"}


def test_summarize_p_mrr_all_skips_facets_without_pairs():
    t = _tiny_table()
    t.loc[t.facet == "result", "p-mrr"] = math.nan
    pmrr = evaluation.summarize(t)["p-mrr"]
    assert math.isnan(pmrr["result"])
    assert pmrr["all"] == pytest.approx((0.2 + 0.3) / 2)


def test_summarize_rejects_unknown_aggregation():
    with pytest.raises(KitError, match="unknown aggregation 'median'"):
        evaluation.summarize(_tiny_table(), "median")


# --- run checks ----------------------------------------------------------------------------


def test_check_run_accepts_the_sample(data, specter):
    evaluation.check_run(specter, data, "pool")


def test_check_run_rejects_unknown_seed(data, specter_copy):
    specter_copy["999_background"] = {"1": 1.0}
    with pytest.raises(KitError, match="unknown seed/facet 999_background") as err:
        evaluation.check_run(specter_copy, data, "pool", source="runs/x.json")
    assert "runs/x.json" in str(err.value)
    with pytest.raises(KitError, match="unknown seed/facet"):
        evaluation.check_run(specter_copy, data, "pooled")


def test_check_run_candidate_outside_pool(data, specter_copy):
    qid = "10014168_background"
    outsider = next(p for p in data.papers if p not in data.queries[qid].grades)
    specter_copy[qid][outsider] = 0.0  # ranks first: every SPECTER score is negative
    with pytest.raises(KitError, match=f"candidate {outsider} for {qid} is outside the judged pool"):
        evaluation.check_run(specter_copy, data, "pool")
    evaluation.check_run(specter_copy, data, "pooled")  # accepted: unjudged counts as non-relevant
    evaluation.check_run(specter_copy, data, "full")
    table = evaluation.per_query(data, specter_copy)
    before = evaluation.per_query(data, {qid: dict(specter_copy[qid], **{outsider: -1e9})})
    assert table.loc[qid, "ndcg@20"] < before.loc[qid, "ndcg@20"]  # an unjudged doc on top costs
    assert table.loc[qid, "mrr"] < before.loc[qid, "mrr"]


def test_check_run_rejects_unknown_protocol_and_empty_run(data, specter):
    with pytest.raises(KitError, match="unknown protocol 'web'"):
        evaluation.check_run(specter, data, "web")
    with pytest.raises(KitError, match="x.trec: the run ranks no queries"):
        evaluation.check_run({}, data, "pool", source="x.trec")


# --- Human reference ------------------------------------------------------------------------


def test_human_reference_ndcg20(data):
    summary = evaluation.summarize(human.human_per_query(data))
    assert 0.77 < summary["ndcg@20"]["all"] < 0.78
    assert round(summary["ndcg@20"]["all"], 4) == 0.7759
    assert {f: round(summary["ndcg@20"][f], 4) for f in ("background", "method", "result")} == {
        "background": 0.8251, "method": 0.7160, "result": 0.7893,
    }


def test_human_is_the_mean_of_the_two_annotator_slots(data):
    first, second = (evaluation.per_query(data, human.annotator_run(data, s)) for s in (0, 1))
    averaged = human.human_per_query(data)
    assert averaged["ndcg@20"].tolist() == pytest.approx(((first["ndcg@20"] + second["ndcg@20"]) / 2).tolist())
    assert not np.allclose(first["ndcg@20"], second["ndcg@20"])
    q = data.queries["10014168_background"]
    assert human.annotator_run(data, 0)[q.qid]["13926706"] == 0.0  # ann1's grade
    assert human.annotator_run(data, 1)[q.qid]["13926706"] == 1.0  # ann2's grade
