"""Metrics against hand computations and against pytrec_eval called directly."""

from __future__ import annotations

import math
from math import log2

import numpy as np
import pytest
import pytrec_eval

from evalkit import metrics
from evalkit.errors import KitError

# --- NDCG, csfcube discount -----------------------------------------------------------------


def test_ndcg_csfcube_hand_example():
    # ranked grades 3, 2, 3, 0, 1; weights: r=1 -> 1, r=2 -> 1/log2(2) = 1, r=3 -> 1/log2(3),
    # r=4 -> 1/log2(4) = 1/2, r=5 -> 1/log2(5)
    # DCG   = 3 + 2 + 3/log2(3) + 0/2 + 1/log2(5) = 7.32347...; NDCG = 7.32347 / 7.76186 = 0.94352
    # ideal = sorted 3, 3, 2, 1, 0: 3 + 3 + 2/log2(3) + 1/2 + 0 = 7.76186...
    dcg = 3 + 2 + 3 / log2(3) + 0 / 2 + 1 / log2(5)
    ideal = 3 + 3 + 2 / log2(3) + 1 / 2 + 0 / log2(5)
    assert metrics.ndcg_csfcube([3, 2, 3, 0, 1], 5) == pytest.approx(dcg / ideal, abs=1e-12)
    assert metrics.ndcg_csfcube([3, 2, 3, 0, 1], 5) == pytest.approx(0.943520, abs=1e-6)


def test_ndcg_csfcube_ranks_one_and_two_weigh_the_same():
    # [1, 2]: DCG = 1/1 + 2/log2(2) = 3; ideal [2, 1] = 2 + 1 = 3 -> 1.0 (trec would give < 1)
    assert metrics.ndcg_csfcube([1, 2], 2) == 1.0
    assert metrics.ndcg_csfcube([0, 3, 0], 3) == 1.0  # 3 at rank 2 weighs as at rank 1


def test_ndcg_csfcube_cut_off_and_ideal_from_the_ranked_grades():
    # k=2: DCG@2 = 0 + 3 = 3; ideal of the ranked grades [3, 2, 0] at 2 = 3 + 2 = 5 -> 0.6
    assert metrics.ndcg_csfcube([0, 3, 2], 2) == pytest.approx(0.6, abs=1e-15)
    # the grade below the cut-off still shapes the ideal: [2, 0, 3] at k=2 -> 2 / (3 + 2) = 0.4
    assert metrics.ndcg_csfcube([2, 0, 3], 2) == pytest.approx(0.4, abs=1e-15)


def test_ndcg_csfcube_without_relevant_grades_is_zero():
    assert metrics.ndcg_csfcube([0, 0, 0], 20) == 0.0
    assert metrics.ndcg_csfcube([], 20) == 0.0


# --- trec conventions (ir_measures) ----------------------------------------------------------

QRELS = {"q": {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2}}  # relevant (grade >= 2): a, b, e


def test_trec_metrics_hand_example():
    run = {"q": {"a": 0.9, "d": 0.8, "b": 0.7, "c": 0.6}}  # ranking a, d, b, c; e not retrieved
    values = metrics.trec_metrics(QRELS, run, 3)["q"]
    # nDCG@3: DCG = 3/log2(2) + 0/log2(3) + 2/log2(4) = 3 + 0 + 1 = 4
    #         ideal from all judged grades 3, 2, 2 (1, 0): 3/1 + 2/log2(3) + 2/2 = 4 + 2/log2(3)
    assert values["ndcg@3"] == pytest.approx(4 / (4 + 2 / log2(3)), abs=1e-12)
    # AP: relevant at ranks 1 (a) and 3 (b), 3 relevant in all: (1/1 + 2/3) / 3 = 5/9
    assert values["map"] == pytest.approx(5 / 9, abs=1e-12)
    # RR: first relevant at rank 1
    assert values["mrr"] == 1.0
    # P@3 = 2/3 (a, b); R@3 = 2 of 3 relevant = 2/3
    assert values["p@3"] == pytest.approx(2 / 3, abs=1e-12)
    assert values["r@3"] == pytest.approx(2 / 3, abs=1e-12)


def test_trec_metrics_binary_threshold_is_grade_two():
    # only c (grade 1) and d retrieved: nothing counts as relevant for AP, RR, P, R
    values = metrics.trec_metrics(QRELS, {"q": {"c": 2.0, "d": 1.0}}, 3)["q"]
    assert (values["map"], values["mrr"], values["p@3"], values["r@3"]) == (0.0, 0.0, 0.0, 0.0)
    # but graded nDCG gains from grade 1: DCG = 1; ideal = 3 + 2/log2(3) + 2/2
    assert values["ndcg@3"] == pytest.approx(1 / (4 + 2 / log2(3)), abs=1e-12)
    # RR with the first relevant doc at rank 3: 1/3
    assert metrics.trec_metrics(QRELS, {"q": {"c": 3.0, "d": 2.0, "e": 1.0}}, 3)["q"]["mrr"] == pytest.approx(1 / 3)


def test_missing_document_lowers_trec_ndcg_but_not_csfcube_ndcg():
    # the run orders what it ranks perfectly (3, 2, 1, 0) but omits e (grade 2)
    run = {"q": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}}
    # csfcube: ideal from the ranked grades themselves -> 1.0
    assert metrics.ndcg_csfcube([3, 2, 1, 0], 3) == 1.0
    # trec: DCG@3 = 3 + 2/log2(3) + 1/2; ideal from all judged (3, 2, 2) = 3 + 2/log2(3) + 2/2
    trec = metrics.trec_metrics(QRELS, run, 3)["q"]["ndcg@3"]
    assert trec == pytest.approx((3.5 + 2 / log2(3)) / (4 + 2 / log2(3)), abs=1e-12)
    assert trec == pytest.approx(0.904977, abs=1e-6) and trec < 1.0
    # ranking e in its place restores 1.0 under trec too
    full = {"q": {"a": 5.0, "b": 4.0, "e": 3.0, "c": 2.0, "d": 1.0}}
    assert metrics.trec_metrics(QRELS, full, 3)["q"]["ndcg@3"] == pytest.approx(1.0, abs=1e-12)


def test_trec_metrics_ties_follow_the_kit_rule_not_pytrec_evals():
    # pytrec_eval alone breaks the tie by doc id descending (b first, RR = 1/2);
    # the kit ranks a first (id ascending) and hands the library strictly decreasing scores
    qrels, run = {"q": {"a": 2, "b": 0}}, {"q": {"a": 1.0, "b": 1.0}}
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=2).evaluate(run)
    assert direct["q"]["recip_rank"] == 0.5
    assert metrics.trec_metrics(qrels, run, 20)["q"]["mrr"] == 1.0
    assert metrics.rank_scores({"q": {"b": 1.0, "a": 1.0, "c": 9.0}}) == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}


def test_trec_metrics_rejects_a_non_positive_cut_off():
    # k=0 used to reach pytrec_eval, which aborts the whole process on a failed assertion
    with pytest.raises(KitError, match="k=0"):
        metrics.trec_metrics(QRELS, {"q": {"a": 1.0}}, 0)


def test_trec_metrics_agree_with_pytrec_eval():
    rng = np.random.default_rng(20240611)
    qrels, run = {}, {}
    for q in range(10):
        docs = [f"d{q}_{i}" for i in range(80)]
        grades = rng.choice(4, size=80, p=[0.6, 0.2, 0.12, 0.08])
        # judge the first 70 docs; rank 60 of the 80 (some judged docs missing, some unjudged ranked)
        qrels[f"q{q}"] = {doc: int(g) for doc, g in zip(docs[:70], grades[:70])}
        ranked = rng.choice(80, size=60, replace=False)
        scores = rng.permutation(60) + rng.random(60)  # distinct
        run[f"q{q}"] = {docs[i]: float(s) for i, s in zip(ranked, scores)}
    ours = metrics.trec_metrics(qrels, run, 20)
    graded = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_20"}).evaluate(run)
    binary = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "recip_rank", "P_20", "recall_20"}, relevance_level=2
    ).evaluate(run)
    assert set(ours) == set(graded) == set(binary) == set(run)
    pairs = {"ndcg@20": (graded, "ndcg_cut_20"), "map": (binary, "map"), "mrr": (binary, "recip_rank"),
             "p@20": (binary, "P_20"), "r@20": (binary, "recall_20")}
    for qid in run:
        for column, (table, name) in pairs.items():
            assert ours[qid][column] == pytest.approx(table[qid][name], abs=1e-12), (qid, column)
    # the random run is not degenerate
    assert 0 < np.mean([ours[q]["ndcg@20"] for q in run]) < 1
    assert len({round(ours[q]["map"], 9) for q in run}) > 5


# --- p-MRR -----------------------------------------------------------------------------------


def test_pair_score_matches_mteb_checks():
    # relevant under i; rank 4 under i, rank 1 under i' (it moved up for the wrong instruction): 1/4 - 1
    assert metrics.pair_score(4, 1) == -0.75
    # rank 1 under i, rank 4 under i': 1 - 1/4
    assert metrics.pair_score(1, 4) == 0.75
    assert metrics.pair_score(3, 3) == 0.0
    # bounded in [-1, 1]: 1 - R_i/R_i' (not the paper's typo 1 - R_i'/R_i, which would give 1 - 100 here)
    assert metrics.pair_score(1, 100) == pytest.approx(0.99)
    assert metrics.pair_score(100, 1) == pytest.approx(-0.99)


def test_p_mrr_from_scores():
    under_i = {"x": 1.0, "a": 4.0, "b": 3.0, "c": 2.0}  # x at rank 4
    under_other = {"x": 9.0, "a": 4.0, "b": 3.0, "c": 2.0}  # x at rank 1
    assert metrics.p_mrr({"x"}, under_i, under_other) == -0.75
    assert metrics.p_mrr({"x"}, under_other, under_i) == 0.75
    assert metrics.p_mrr({"a"}, under_i, under_i) == 0.0


def test_p_mrr_missing_document_ranks_after_the_last_document():
    # z absent from the run under i (3 docs): rank 3 + 1 = 4; under i' it ranks 1 -> 1/4 - 1 = -0.75
    assert metrics.p_mrr({"z"}, {"a": 3.0, "b": 2.0, "c": 1.0}, {"z": 5.0, "a": 1.0}) == -0.75
    # x ranks 1 under i, absent from the run under i' (4 docs): rank 5 -> 1 - 1/5 = 0.8
    assert metrics.p_mrr({"x"}, {"x": 1.0}, {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}) == pytest.approx(0.8)
    # absent from both: rank 2 under i (1 doc), rank 3 under i' (2 docs) -> 1 - 2/3
    assert metrics.p_mrr({"y"}, {"a": 1.0}, {"a": 1.0, "b": 0.0}) == pytest.approx(1 / 3)


def test_p_mrr_is_the_mean_over_changed_documents():
    under_i = {"x": 9.0, "a": 4.0, "b": 3.0, "y": 2.0}  # x rank 1, y rank 4
    under_other = {"y": 9.0, "a": 4.0, "b": 3.0, "x": 2.0}  # y rank 1, x rank 4
    # x: 1 - 1/4 = 0.75; y: 1/4 - 1 = -0.75; mean 0
    assert metrics.p_mrr({"x", "y"}, under_i, under_other) == 0.0
    # x: 0.75; z absent from both runs of 4 docs: rank 5 in both -> 0; mean (0.75 + 0) / 2 = 0.375
    assert metrics.p_mrr(["x", "z"], under_i, under_other) == pytest.approx(0.375)
    # x 0.75, a 0 (same rank 2 in both), y -0.75, b 0 -> 0/4
    assert metrics.p_mrr({"x", "a", "y", "b"}, under_i, under_other) == 0.0
    assert metrics.p_mrr({"x", "a"}, under_i, under_other) == pytest.approx(0.375)  # (0.75 + 0) / 2


def test_p_mrr_uses_the_tie_rule():
    # under i: a and x tie, id order puts a first -> x rank 2; under i': x rank 1 -> 1/2 - 1
    assert metrics.p_mrr({"x"}, {"x": 1.0, "a": 1.0}, {"x": 2.0, "a": 1.0}) == -0.5


def test_p_mrr_without_changed_documents_is_nan():
    assert math.isnan(metrics.p_mrr(set(), {"a": 1.0}, {"a": 1.0}))
