"""`evalkit.evaluation.measures`: hand computations, agreement with pytrec_eval / ir_measures called
directly, the tie rule, the missing-document rule, p-MRR against mteb, and the official
CSFCube figures on the real data."""

from __future__ import annotations

import importlib.util
import math
import random
from math import log2
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from evalkit.core.errors import KitError
from evalkit.datasets import csfcube, csfcube_official
from evalkit.evaluation import aggregate, measures

FIVE = ["nDCG@3", "AP", "RR", "P@3", "R@3"]


def one(qrels, run, name, level=2, qid="q"):
    return measures.judged_values(qrels, run, [name], level).loc[qid, name]


# --- nDCG, csfcube discount ------------------------------------------------------------------


def test_ndcg_csfcube_hand_example():
    # ranked grades 3, 2, 3, 0, 1; weights: r=1 -> 1, r=2 -> 1/log2(2) = 1, r=3 -> 1/log2(3),
    # r=4 -> 1/log2(4) = 1/2, r=5 -> 1/log2(5)
    # DCG   = 3 + 2 + 3/log2(3) + 0/2 + 1/log2(5) = 7.32347...
    # ideal = sorted 3, 3, 2, 1, 0: 3 + 3 + 2/log2(3) + 1/2 + 0 = 7.76186...; NDCG = 0.94352
    dcg = 3 + 2 + 3 / log2(3) + 0 / 2 + 1 / log2(5)
    ideal = 3 + 3 + 2 / log2(3) + 1 / 2 + 0 / log2(5)
    assert measures.ndcg_csfcube([3, 2, 3, 0, 1], 5) == pytest.approx(dcg / ideal, abs=1e-12)
    assert measures.ndcg_csfcube([3, 2, 3, 0, 1], 5) == pytest.approx(0.943520, abs=1e-6)
    # the same through the per-query table (the ir_measures custom measure)
    qrels = {"q": {"a": 3, "b": 2, "c": 3, "d": 0, "e": 1}}
    run = {"q": {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}}
    assert one(qrels, run, "nDCG_csfcube@5") == pytest.approx(dcg / ideal, abs=1e-12)


def test_ndcg_csfcube_ranks_one_and_two_weigh_the_same():
    # [1, 2]: DCG = 1/1 + 2/log2(2) = 3; ideal [2, 1] = 2 + 1 = 3 -> 1.0 (trec would give < 1)
    assert measures.ndcg_csfcube([1, 2], 2) == 1.0
    assert measures.ndcg_csfcube([0, 3, 0], 3) == 1.0  # 3 at rank 2 weighs as at rank 1
    qrels, run = {"q": {"a": 1, "b": 2}}, {"q": {"a": 2.0, "b": 1.0}}
    assert one(qrels, run, "nDCG_csfcube@2") == 1.0
    assert one(qrels, run, "nDCG@2") == pytest.approx((1 + 2 / log2(3)) / (2 + 1 / log2(3)), abs=1e-12)


def test_ndcg_csfcube_cut_off_and_ideal_from_every_ranked_grade():
    # k=2: DCG@2 = 0 + 3 = 3; ideal of the ranked grades [3, 2, 0] at 2 = 3 + 2 = 5 -> 0.6
    assert measures.ndcg_csfcube([0, 3, 2], 2) == pytest.approx(0.6, abs=1e-15)
    # the grade below the cut-off still shapes the ideal: [2, 0, 3] at k=2 -> 2 / (3 + 2) = 0.4
    assert measures.ndcg_csfcube([2, 0, 3], 2) == pytest.approx(0.4, abs=1e-15)
    # through ir_measures: the custom measure must see the whole run, not its top k
    qrels = {"q": {"a": 2, "b": 0, "c": 3}}
    assert one(qrels, {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, "nDCG_csfcube@2") == pytest.approx(0.4, abs=1e-15)


def test_ndcg_csfcube_unjudged_ranked_documents_count_zero():
    # x is unjudged: grades along the ranking 0 (x), 3 (a), 2 (b) -> the 0.6 example above
    qrels = {"q": {"a": 3, "b": 2}}
    assert one(qrels, {"q": {"x": 3.0, "a": 2.0, "b": 1.0}}, "nDCG_csfcube@2") == pytest.approx(0.6, abs=1e-15)


def test_ndcg_csfcube_without_relevant_grades_is_zero():
    assert measures.ndcg_csfcube([0, 0, 0], 20) == 0.0
    assert measures.ndcg_csfcube([], 20) == 0.0
    assert one({"q": {"a": 0, "b": 0}}, {"q": {"a": 1.0, "b": 0.5}}, "nDCG_csfcube@20") == 0.0


# --- trec conventions (ir_measures) ----------------------------------------------------------

QRELS = {"q": {"a": 3, "b": 2, "c": 1, "d": 0, "e": 2}}  # relevant at level 2: a, b, e


def test_trec_measures_hand_example():
    run = {"q": {"a": 0.9, "d": 0.8, "b": 0.7, "c": 0.6}}  # ranking a, d, b, c; e not retrieved
    values = measures.judged_values(QRELS, run, FIVE, 2).loc["q"]
    # nDCG@3: DCG = 3/log2(2) + 0/log2(3) + 2/log2(4) = 3 + 0 + 1 = 4
    #         ideal from all judged grades 3, 2, 2 (1, 0): 3/1 + 2/log2(3) + 2/2 = 4 + 2/log2(3)
    assert values["nDCG@3"] == pytest.approx(4 / (4 + 2 / log2(3)), abs=1e-12)
    # AP: relevant at ranks 1 (a) and 3 (b), 3 relevant in all: (1/1 + 2/3) / 3 = 5/9
    assert values["AP"] == pytest.approx(5 / 9, abs=1e-12)
    assert values["RR"] == 1.0
    # P@3 = 2/3 (a, b); R@3 = 2 of 3 relevant = 2/3
    assert values["P@3"] == pytest.approx(2 / 3, abs=1e-12)
    assert values["R@3"] == pytest.approx(2 / 3, abs=1e-12)


def test_binary_measures_use_the_relevance_level():
    # only c (grade 1) and d retrieved: nothing is relevant at level 2
    values = measures.judged_values(QRELS, {"q": {"c": 2.0, "d": 1.0}}, FIVE, 2).loc["q"]
    assert (values["AP"], values["RR"], values["P@3"], values["R@3"]) == (0.0, 0.0, 0.0, 0.0)
    # graded nDCG gains from grade 1 whatever the level: DCG = 1; ideal = 3 + 2/log2(3) + 2/2
    assert values["nDCG@3"] == pytest.approx(1 / (4 + 2 / log2(3)), abs=1e-12)
    # RR with the first relevant doc at rank 3: 1/3
    assert one(QRELS, {"q": {"c": 3.0, "d": 2.0, "e": 1.0}}, "RR") == pytest.approx(1 / 3)
    # at level 1, c counts: RR = 1, P@3 = 1/3 (c of c, d), R@3 = 1/4 (of a, b, c, e)
    level1 = measures.judged_values(QRELS, {"q": {"c": 2.0, "d": 1.0}}, FIVE, 1).loc["q"]
    assert (level1["RR"], level1["P@3"], level1["R@3"]) == pytest.approx((1.0, 1 / 3, 1 / 4))


def test_ap_at_1000_grade_one_is_relevant():
    qrels = {"q": {"a": 1, "b": 0, "c": 2, "d": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}  # d relevant but not retrieved
    # relevant: a, c, d (3). Precision at each retrieved relevant: a@1 1/1, c@3 2/3. AP = 5/9
    assert one(qrels, run, "AP@1000", level=1) == pytest.approx(5 / 9)


def test_ndcg_at_5_graded_trec_discount():
    qrels = {"q": {"a": 1, "b": 0, "c": 2, "d": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}
    # DCG@5 = 1/log2(2) + 0/log2(3) + 2/log2(4) = 2; ideal grades 2, 1, 1, 0: 2 + 1/log2(3) + 1/2
    assert one(qrels, run, "nDCG@5", level=1) == pytest.approx(2 / (2 + 1 / log2(3) + 0.5))
    assert one(qrels, run, "nDCG@5", level=1) == pytest.approx(0.638788, abs=1e-6)


def test_ndcg_cutoffs_5_and_10():
    qrels = {"q": {"f": 1}}
    run = {"q": {d: 6 - i for i, d in enumerate("abcdef")}}  # f ranks 6th
    # nDCG@5 = 0 (f is beyond the cut); nDCG@10 = (1/log2(7)) / (1/log2(2)) = 0.356207
    table = measures.judged_values(qrels, run, ["nDCG@5", "nDCG@10"], 1)
    assert table.loc["q", "nDCG@5"] == 0.0
    assert table.loc["q", "nDCG@10"] == pytest.approx(0.356207, abs=1e-6)


def test_rr_at_10_msmarco_dev():
    qrels = {"q1": {"c": 1}, "q2": {"k": 1}}
    run = {
        "q1": {"a": 3.0, "b": 2.0, "c": 1.0},  # first relevant at rank 3: 1/3
        "q2": {d: 11 - i for i, d in enumerate("abcdefghijk")},  # k at rank 11: beyond @10, 0
    }
    table = measures.judged_values(qrels, run, ["RR@10"], 1)
    assert table["RR@10"].to_dict() == pytest.approx({"q1": 1 / 3, "q2": 0.0})
    assert aggregate.plain_mean(table["RR@10"]) == pytest.approx(1 / 6)


def test_missing_document_lowers_trec_ndcg_but_not_csfcube_ndcg():
    # the run orders what it ranks perfectly (3, 2, 1, 0) but omits e (grade 2)
    run = {"q": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}}
    table = measures.judged_values(QRELS, run, ["nDCG@3", "nDCG_csfcube@3"], 2)
    # csfcube: ideal from the ranked grades themselves -> 1.0
    assert table.loc["q", "nDCG_csfcube@3"] == 1.0
    # trec: DCG@3 = 3 + 2/log2(3) + 1/2; ideal from all judged (3, 2, 2) = 3 + 2/log2(3) + 2/2
    trec = table.loc["q", "nDCG@3"]
    assert trec == pytest.approx((3.5 + 2 / log2(3)) / (4 + 2 / log2(3)), abs=1e-12)
    assert trec == pytest.approx(0.904977, abs=1e-6)
    # ranking e in its place restores 1.0 under trec too
    full = {"q": {"a": 5.0, "b": 4.0, "e": 3.0, "c": 2.0, "d": 1.0}}
    assert one(QRELS, full, "nDCG@3") == pytest.approx(1.0, abs=1e-12)


def test_unjudged_queries_are_nan_and_empty_runs_zero():
    qrels = {"a": {}, "b": {"x": 1}, "d": {"x": 1}}
    run = {"c": {"x": 1.0}, "a": {"x": 1.0}, "b": {"x": 1.0}, "d": {}}
    table = measures.judged_values(qrels, run, ["nDCG@10", "nDCG_csfcube@10", "AP", "RR@10", "P@5", "R@5"], 1)
    assert list(table.index) == ["a", "b", "c", "d"] and table.index.name == "qid"
    assert table.loc[["a", "c"]].isna().all().all()  # no judgments: NaN, not 0
    assert (table.loc["d"] == 0.0).all()  # judged, nothing ranked: 0
    assert (table.loc["b"] > 0).all()


def test_per_query_columns_as_given_and_errors():
    table = measures.judged_values(QRELS, {"q": {"a": 1.0}}, ["R@3", "nDCG_csfcube@20", "AP@5"], 2)
    assert list(table.columns) == ["R@3", "nDCG_csfcube@20", "AP@5"]
    for bad, message in [("MAP", "unknown measure 'MAP'"), ("ndcg@10", "unknown measure"),
                         ("P", "needs a cut-off"), ("nDCG_csfcube", "needs a cut-off"),
                         ("nDCG@0", "k=0"), ("AP(rel=1)", "unknown measure")]:
        with pytest.raises(KitError, match=message.replace("(", r"\(")):
            measures.judged_values(QRELS, {"q": {"a": 1.0}}, [bad], 2)
    with pytest.raises(KitError, match="repeat"):
        measures.judged_values(QRELS, {"q": {"a": 1.0}}, ["AP", "AP"], 2)
    with pytest.raises(KitError, match="relevance_level=0"):
        measures.judged_values(QRELS, {"q": {"a": 1.0}}, ["AP"], 0)


def test_parse_measure_sets_rel_on_binary_measures_only():
    assert repr(measures.parse_measure("AP@1000", 2)) == "AP(rel=2)@1000"
    assert repr(measures.parse_measure("RR", 1)) == "RR"  # rel=1 is ir_measures' default
    assert repr(measures.parse_measure("nDCG@10", 2)) == "nDCG@10"
    assert repr(measures.parse_measure("nDCG_csfcube@20", 2)) == "nDCG_csfcube@20"
    assert measures.parse_measure("nDCG_csfcube@20", 2) is measures.parse_measure("nDCG_csfcube@20", 1)


# --- ties --------------------------------------------------------------------------------------


def test_ties_follow_the_kit_rule_not_pytrec_evals():
    # pytrec_eval alone breaks the tie by doc id descending (b first, RR = 1/2);
    # the kit ranks a first (id ascending) and hands the library strictly decreasing scores
    qrels, run = {"q": {"a": 2, "b": 0}}, {"q": {"a": 1.0, "b": 1.0}}
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=2).evaluate(run)
    assert direct["q"]["recip_rank"] == 0.5
    assert one(qrels, run, "RR") == 1.0
    assert one({"q": {"a": 1}}, {"q": {"b": 1.0, "a": 1.0}}, "RR@10", level=1) == 1.0
    assert measures.rank_scores({"q": {"b": 1.0, "a": 1.0, "c": 9.0}}) == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}


def _random_run(seed: int, ties: bool):
    """10 queries x 80 documents, 70 judged (grades 0-3), 60 ranked (some judged docs missing,
    some unjudged ranked); with `ties`, scores come from 6 values so most ranks are tied."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(10):
        docs = [f"d{q}_{i:02d}" for i in range(80)]
        grades = rng.choice(4, size=80, p=[0.6, 0.2, 0.12, 0.08])
        qrels[f"q{q}"] = {doc: int(g) for doc, g in zip(docs[:70], grades[:70])}
        chosen = rng.choice(80, size=60, replace=False)
        scores = rng.integers(0, 6, size=60) / 5 if ties else rng.permutation(60) + rng.random(60)
        run[f"q{q}"] = {docs[i]: float(s) for i, s in zip(chosen, scores)}
    return qrels, run


def _kit_order_scores(run):
    """The kit's tie rule written out independently: sort by (-score, doc id), score n..1."""
    out = {}
    for qid, scores in run.items():
        order = sorted(scores, key=lambda doc: (-scores[doc], doc))
        out[qid] = {doc: float(len(order) - i) for i, doc in enumerate(order)}
    return out


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("level", [1, 2])
def test_standard_measures_agree_with_pytrec_eval_and_ir_measures(ties, level):
    qrels, run = _random_run(20240611, ties)
    if ties:
        assert any(len(set(s.values())) < len(s) for s in run.values())
    names = ["nDCG@20", "nDCG", "AP", "AP@10", "RR", "RR@10", "P@20", "R@20"]
    ours = measures.judged_values(qrels, run, names, level)
    untied = _kit_order_scores(run)
    graded = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_20", "ndcg"}).evaluate(untied)
    binary = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "map_cut_10", "recip_rank", "P_20", "recall_20"}, relevance_level=level
    ).evaluate(untied)
    library = {"nDCG@20": (graded, "ndcg_cut_20"), "nDCG": (graded, "ndcg"), "AP": (binary, "map"),
               "AP@10": (binary, "map_cut_10"), "RR": (binary, "recip_rank"), "P@20": (binary, "P_20"),
               "R@20": (binary, "recall_20")}
    for qid in run:
        for name, (table, key) in library.items():
            assert ours.loc[qid, name] == pytest.approx(table[qid][key], abs=1e-12), (qid, name)
    rr10 = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.RR(rel=level) @ 10], qrels, untied)}
    assert ours["RR@10"].to_dict() == pytest.approx(rr10, abs=1e-12)
    # the random run is not degenerate
    assert 0 < ours["nDCG@20"].mean() < 1 and ours["AP"].nunique() > 5


def test_input_order_does_not_change_any_value():
    # regression: with tied scores a library's own tie rule (or dict order) must not leak in
    qrels, run = _random_run(7, ties=True)
    names = ["nDCG@10", "nDCG_csfcube@10", "AP", "RR@10", "P@10", "R@10"]
    reference = measures.judged_values(qrels, run, names, 2)
    rng = random.Random(3)
    for _ in range(3):
        shuffled = {}
        for qid in rng.sample(list(run), len(run)):
            items = list(run[qid].items())
            rng.shuffle(items)
            shuffled[qid] = dict(items)
        pd.testing.assert_frame_equal(measures.judged_values(qrels, shuffled, names, 2), reference)
        pairs = {f"q{i}": f"q{i + 1}" for i in range(9)}
        pd.testing.assert_series_equal(measures.p_mrr(qrels, shuffled, pairs, 2), measures.p_mrr(qrels, run, pairs, 2))
    # the tie rule matters: ties broken by id descending instead change values
    reversed_ties = {qid: {doc: scores[doc] + 1e-9 * i for i, doc in enumerate(sorted(scores))}
                     for qid, scores in run.items()}
    other = measures.judged_values(qrels, reversed_ties, names, 2)
    assert not np.allclose(other["nDCG@10"], reference["nDCG@10"])
    assert not np.allclose(other["nDCG_csfcube@10"], reference["nDCG_csfcube@10"])


# --- p-MRR ---------------------------------------------------------------------------------------


def test_pair_score_matches_mteb_checks():
    # rank 4 under i, rank 1 under i' (it moved up for the wrong instruction): 1/4 - 1
    assert measures.pair_score(4, 1) == -0.75
    assert measures.pair_score(1, 4) == 0.75  # 1 - 1/4
    assert measures.pair_score(3, 3) == 0.0
    # bounded in [-1, 1]: 1 - R_i/R_i' (not the paper's typo 1 - R_i'/R_i, which would give 1 - 100 here)
    assert measures.pair_score(1, 100) == pytest.approx(0.99)
    assert measures.pair_score(100, 1) == pytest.approx(-0.99)


def _pmrr(changed, scores_i, scores_other):
    """p-MRR of one pair i -> o whose changed documents are exactly `changed`."""
    qrels = {"i": {doc: 1 for doc in changed}, "o": {}}
    return measures.p_mrr(qrels, {"i": scores_i, "o": scores_other}, {"i": "o"}, 1)["i"]


def test_p_mrr_from_scores():
    under_i = {"x": 1.0, "a": 4.0, "b": 3.0, "c": 2.0}  # x at rank 4
    under_other = {"x": 9.0, "a": 4.0, "b": 3.0, "c": 2.0}  # x at rank 1
    assert _pmrr({"x"}, under_i, under_other) == -0.75
    assert _pmrr({"x"}, under_other, under_i) == 0.75
    assert _pmrr({"a"}, under_i, under_i) == 0.0


def test_p_mrr_missing_document_ranks_after_the_last_document():
    # z absent from the run under i (3 docs): rank 3 + 1 = 4; under i' it ranks 1 -> 1/4 - 1 = -0.75
    assert _pmrr({"z"}, {"a": 3.0, "b": 2.0, "c": 1.0}, {"z": 5.0, "a": 1.0}) == -0.75
    # x ranks 1 under i, absent from the run under i' (4 docs): rank 5 -> 1 - 1/5 = 0.8
    assert _pmrr({"x"}, {"x": 1.0}, {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}) == pytest.approx(0.8)
    # absent from both: rank 2 under i (1 doc), rank 3 under i' (2 docs) -> 1 - 2/3
    assert _pmrr({"y"}, {"a": 1.0}, {"a": 1.0, "b": 0.0}) == pytest.approx(1 / 3)


def test_p_mrr_is_the_mean_over_changed_documents():
    under_i = {"x": 9.0, "a": 4.0, "b": 3.0, "y": 2.0}  # x rank 1, y rank 4
    under_other = {"y": 9.0, "a": 4.0, "b": 3.0, "x": 2.0}  # y rank 1, x rank 4
    assert _pmrr({"x", "y"}, under_i, under_other) == 0.0  # x: 1 - 1/4 = 0.75; y: 1/4 - 1; mean 0
    # x 0.75; z absent from both runs of 4 docs: rank 5 in both -> 0; mean 0.375
    assert _pmrr({"x", "z"}, under_i, under_other) == pytest.approx(0.375)
    assert _pmrr({"x", "a", "y", "b"}, under_i, under_other) == 0.0  # 0.75 + 0 - 0.75 + 0
    assert _pmrr({"x", "a"}, under_i, under_other) == pytest.approx(0.375)


def test_p_mrr_uses_the_tie_rule():
    # under i: a and x tie, id order puts a first -> x rank 2; under i': x rank 1 -> 1/2 - 1
    assert _pmrr({"x"}, {"x": 1.0, "a": 1.0}, {"x": 2.0, "a": 1.0}) == -0.5


def test_p_mrr_without_changed_documents_is_nan():
    assert math.isnan(_pmrr(set(), {"a": 1.0}, {"a": 1.0}))


def test_changed_documents_relevant_only_under_i():
    assert measures.changed_documents({"a": 1, "b": 2, "c": 0, "d": 1}, {"a": 1, "b": 0, "c": 0}, 1) == {"b", "d"}
    assert measures.changed_documents({"a": 3, "b": 2, "c": 1}, {"a": 2, "b": 1}, 2) == {"b"}


def test_p_mrr_follows_the_pairing_table_not_the_id_suffixes():
    pairs = {"q1-og": "q2-changed", "q2-og": "q1-changed"}  # crosswise on purpose
    qrels = {
        "q1-og": {"d1": 1, "d2": 1, "d3": 0},
        "q2-changed": {"d1": 1, "d2": 0},
        "q2-og": {"d3": 2, "d4": 1},
        "q1-changed": {"d3": 0, "d4": 1},
    }
    run = {
        "q1-og": {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6},  # d1 1, d2 2, d3 3, d4 4
        "q2-changed": {"d1": 0.9, "d3": 0.5, "d4": 0.4, "d2": 0.1},  # d1 1, d3 2, d4 3, d2 4
        "q2-og": {"d4": 0.9, "d1": 0.8, "d3": 0.7, "d2": 0.6},  # d4 1, d1 2, d3 3, d2 4
        "q1-changed": {"d3": 0.9, "d4": 0.8, "d1": 0.7, "d2": 0.6},  # d3 1, d4 2, d1 3, d2 4
    }
    # (q1-og, q2-changed): changed {d2}; R_og 2 < R_changed 4: 1 - 2/4 = 1/2
    # (q2-og, q1-changed): changed {d3}; R_og 3 > R_changed 1: 1/3 - 1 = -2/3; mean -1/12
    values = measures.p_mrr(qrels, run, pairs, 1)
    assert values.to_dict() == pytest.approx({"q1-og": 0.5, "q2-og": -2 / 3})
    assert aggregate.plain_mean(values) == pytest.approx(-1 / 12)
    # pairing by suffix: q1 docs {d1, d2}: (1 - 1/3 + 1 - 2/4)/2 = 7/12; q2 {d3, d4}: (2/3 - 1 + 1 - 1/3)/2 = 1/6
    by_suffix = measures.p_mrr(qrels, run, {"q1-og": "q1-changed", "q2-og": "q2-changed"}, 1)
    assert aggregate.plain_mean(by_suffix) == pytest.approx(3 / 8)


def test_followir_pair_end_to_end():
    qrels = {
        "301-og": {"d1": 1, "d2": 1, "d3": 0}, "301-changed": {"d1": 1, "d2": 0, "d3": 0},
        "302-og": {"d4": 2, "d5": 0}, "302-changed": {"d4": 0},
    }
    run = {
        "301-og": {"d1": 0.9, "d2": 0.8, "d3": 0.7},  # d2 rank 2
        "301-changed": {"d2": 0.9, "d1": 0.8, "d3": 0.7},  # d2 rank 1
        "302-og": {"d5": 0.9, "d4": 0.8, "d6": 0.7},  # d4 rank 2
        "302-changed": {"d5": 0.9, "d6": 0.8, "d4": 0.7},  # d4 rank 3
    }
    pairs = {"301-og": "301-changed", "302-og": "302-changed"}
    # p-MRR: 301 {d2}: 1/2 - 1 = -1/2; 302 {d4}: 1 - 2/3 = 1/3; mean -1/12
    assert aggregate.plain_mean(measures.p_mrr(qrels, run, pairs, 1)) == pytest.approx(-1 / 12)
    # AP@1000 on the original instances: 301 d1@1, d2@2: 1; 302 d4@2: 1/2; mean 3/4
    originals = {q: run[q] for q in pairs}
    assert aggregate.plain_mean(measures.judged_values(qrels, originals, ["AP@1000"], 1)["AP@1000"]) == 0.75


def test_p_mrr_run_lacking_a_pair_query_is_an_error():
    with pytest.raises(KitError, match="lacks query b of the p-MRR pair a -> b"):
        measures.p_mrr({}, {"a": {"x": 1.0}}, {"a": "b"}, 1)
    with pytest.raises(KitError, match="lacks query a"):
        measures.p_mrr({}, {"b": {"x": 1.0}}, {"a": "b"}, 1)
    assert measures.p_mrr({}, {}, {}, 1).empty


def _golden_module():
    path = Path(__file__).resolve().parents[2] / "scripts" / "mteb_pmrr_golden.py"
    spec = importlib.util.spec_from_file_location("mteb_pmrr_golden", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Produced by `scripts/mteb_pmrr_golden.py` with mteb 2.26.24 (mteb._evaluators.retrieval_metrics.
# calculate_pmrr, installed in a throwaway venv: torch==2.13.0 first, then mteb), on the
# script's FIXTURE (no ties; documents missing from either run; one pair with no changed
# document, which mteb skips) and TIES. "all" is mteb's aggregate: the mean over the pairs.
MTEB_GOLDEN = {
    "301-og": -0.18333333333333335,
    "302-og": -0.33333333333333337,
    "304-og": 0.5344707327357054,
    "all": 0.005934688689679575,
}
MTEB_TIES = {"401-og": -0.375, "all": -0.375}


def test_p_mrr_equals_mteb_on_a_followir_fixture_without_ties():
    golden = _golden_module()
    fixture = golden.FIXTURE
    values = measures.p_mrr(fixture["qrels"], fixture["run"], fixture["pairs"], 1)
    assert math.isnan(values["303-og"])  # no changed document: NaN here, skipped by mteb
    expected = {q: v for q, v in MTEB_GOLDEN.items() if q != "all"}
    assert values.dropna().to_dict() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert aggregate.plain_mean(values) == pytest.approx(MTEB_GOLDEN["all"], rel=1e-12, abs=1e-15)
    # the changed documents the script hands mteb are the kit's changed documents
    for og, changed in fixture["pairs"].items():
        docs = measures.changed_documents(fixture["qrels"][og], fixture["qrels"][changed], 1)
        assert sorted(docs) == golden.changed_qrels(fixture).get(og.removesuffix("-og"), [])


def test_p_mrr_ties_differ_from_mteb_by_design():
    # mteb (>= 2.19.5) ranks tied documents by id descending, the kit by id ascending: on
    # the TIES fixture mteb gives -0.375 (u1 at rank 2), the kit -0.125 (u1 at rank 1)
    ties = _golden_module().TIES
    values = measures.p_mrr(ties["qrels"], ties["run"], ties["pairs"], 1)
    assert values["401-og"] == pytest.approx(-0.125)
    assert values["401-og"] != pytest.approx(MTEB_TIES["401-og"])
    # with the ties broken as mteb does (id descending), the kit reproduces mteb's value
    mteb_order = {q: {d: scores[d] + 1e-6 * i for i, d in enumerate(sorted(scores))}
                  for q, scores in ties["run"].items()}
    assert measures.p_mrr(ties["qrels"], mteb_order, ties["pairs"], 1)["401-og"] == pytest.approx(MTEB_TIES["401-og"])


def _tied_followir_case(rng: random.Random, pairs: int):
    """Random FollowIR-style runs whose scores take four values (ties everywhere), some
    documents left out of either run, and random grades."""
    qrels, run, mapping, changed = {}, {}, {}, {}
    for n in range(pairs):
        og, ch = f"{n}-og", f"{n}-changed"
        docs = [f"d{rng.randint(0, 60)}" for _ in range(rng.randint(3, 25))]
        docs = list(dict.fromkeys(docs))
        qrels[og] = {d: rng.choice([0, 0, 1, 2]) for d in docs}
        qrels[ch] = {d: g if rng.random() < 0.5 else 0 for d, g in qrels[og].items()}
        for q in (og, ch):
            run[q] = {d: float(rng.choice([0.1, 0.2, 0.3, 0.4])) for d in docs if rng.random() < 0.9}
        mapping[og] = ch
        changed[str(n)] = sorted(measures.changed_documents(qrels[og], qrels[ch], 1))
    return qrels, run, mapping, changed


def test_p_mrr_with_mteb_ties_equals_mteb_on_random_tied_runs():
    # mteb's own evaluator (mteb._evaluators.retrieval_metrics.calculate_pmrr, mteb 2.x as
    # installed by the test extra), pair by pair and over all pairs, on 200 random tied cases
    from mteb._evaluators.retrieval_metrics import calculate_pmrr

    rng = random.Random(4)
    differ = 0
    for _ in range(200):
        qrels, run, mapping, changed = _tied_followir_case(rng, 4)
        kit = measures.p_mrr(qrels, run, mapping, 1, ties="mteb")
        default = measures.p_mrr(qrels, run, mapping, 1)
        scored = {q: c for q, c in changed.items() if c}  # mteb skips pairs without a changed document
        for q, docs in scored.items():
            one = calculate_pmrr({f"{q}-og": run[f"{q}-og"]}, {f"{q}-changed": run[f"{q}-changed"]}, {q: docs})
            assert kit[f"{q}-og"] == pytest.approx(one, rel=1e-12, abs=1e-15)
            differ += default[f"{q}-og"] != pytest.approx(one, rel=1e-12, abs=1e-15)
        if scored:
            originals = {f"{q}-og": run[f"{q}-og"] for q in scored}
            changes = {f"{q}-changed": run[f"{q}-changed"] for q in scored}
            assert aggregate.plain_mean(kit) == pytest.approx(calculate_pmrr(originals, changes, scored),
                                                              rel=1e-12, abs=1e-15)
    assert differ > 50  # the kit's own tie rule gives other values: the option matters


def test_p_mrr_tie_orders_by_hand():
    # a, b, c all tied: kit ranks a, b, c; mteb c, b, a. Changed document a (relevant under i only);
    # i ranks a first (kit) / third (mteb), i' ranks it behind x (0.9) then the tie:
    qrels = {"i": {"a": 1}, "j": {"a": 0}}
    run = {"i": {"a": 0.5, "b": 0.5, "c": 0.5}, "j": {"x": 0.9, "a": 0.5, "b": 0.5}}
    # kit: R_i = 1, R_j = 2 -> 1 - 1/2; mteb: R_i = 3, R_j = 3 -> 0
    assert measures.p_mrr(qrels, run, {"i": "j"}, 1)["i"] == 0.5
    assert measures.p_mrr(qrels, run, {"i": "j"}, 1, ties="mteb")["i"] == 0.0
    assert measures.ranks_ids_descending(run["i"]) == {"c": 1, "b": 2, "a": 3}
    with pytest.raises(KitError, match="tie order 'trec' is not one of kit, mteb"):
        measures.p_mrr(qrels, run, {"i": "j"}, 1, ties="trec")


# --- robustness@k --------------------------------------------------------------------------------


def test_robustness_is_mean_of_group_minima():
    qrels = {"i1": {"x": 1}, "i2": {"x": 1}, "i3": {"x": 1}}
    run = {
        "i1": {"x": 3.0, "y": 2.0, "z": 1.0},  # x at rank 1: nDCG@10 = 1
        "i2": {"y": 3.0, "x": 2.0, "z": 1.0},  # x at rank 2: 1/log2(3) = 0.630930
        "i3": {"y": 3.0, "z": 2.0, "x": 1.0},  # x at rank 3: 1/log2(4) = 0.5
    }
    groups = {"umami": ("i1", "i2"), "fever": ("i3",)}
    values = measures.judged_values(qrels, run, ["nDCG@10"], 1)["nDCG@10"]
    # robustness@10 = (min(1, 0.630930) + 0.5) / 2 = 0.565465; nDCG@10 = (1 + 0.630930 + 0.5) / 3
    assert measures.robustness(values.to_dict(), groups) == pytest.approx((1 / log2(3) + 0.5) / 2)
    assert aggregate.plain_mean(values) == pytest.approx((1 + 1 / log2(3) + 0.5) / 3)
    assert math.isnan(measures.robustness({}, {}))


def test_robustness_needs_every_instance():
    with pytest.raises(KitError, match="no value for instance i2"):
        measures.robustness({"i1": 1.0}, {"q": ("i1", "i2")})
    with pytest.raises(KitError, match="no value for instance i1"):
        measures.robustness({"i1": math.nan}, {"q": ("i1",)})


# --- CSFCube, the real data ----------------------------------------------------------------------

OFFICIAL_SPECTER = {"background": 0.6624, "method": 0.3765, "result": 0.5643, "all": 0.5314}


@pytest.fixture(scope="module")
def cube():
    data = csfcube.load()
    return data, csfcube.to_collection(data)


@pytest.fixture(scope="module")
def specter_run(cube):
    data, _ = cube
    run = {}
    for facet in csfcube.FACETS:
        path = csfcube_official.official_path(data.root / "sample_ranked_pools", "specter", facet)
        run.update(csfcube_official.read_official(path, facet))
    return run


def _summary(collection, table, folds=True):
    test_fold_of = {q: collection.test_fold_of(q) for q in table.index} if folds else None
    return aggregate.summarize(table, collection.strata, test_fold_of, [measures.PMRR])


def _rounded(parts):
    return {part: round(value, 4) for part, value in parts.items()}


def test_specter_official_ndcg20_csfcube_discount(cube, specter_run):
    data, collection = cube
    table = measures.judged_values(data.qrels(), specter_run, ["nDCG_csfcube@20", "nDCG@20"],
                                   collection.relevance_level)
    summary = _summary(collection, table)
    assert _rounded(summary["nDCG_csfcube@20"]) == OFFICIAL_SPECTER
    # the trec discount differs (the official script takes the ideal from the ranked pool)
    assert _rounded(summary["nDCG@20"]) == {"background": 0.6644, "method": 0.3814, "result": 0.5682, "all": 0.5350}


def test_per_query_csfcube_ndcg_equals_a_direct_computation(cube, specter_run):
    data, collection = cube
    qid = "10014168_background"
    grades_of = data.queries[qid].grades
    order = sorted(specter_run[qid], key=specter_run[qid].get, reverse=True)  # distinct scores
    grades = [grades_of[doc] for doc in order]

    def dcg(gs):
        return sum(g / (1 if r == 1 else log2(r)) for r, g in enumerate(gs[:20], start=1))

    table = measures.judged_values(collection.qrels, specter_run, ["nDCG_csfcube@20"], 2)
    assert table.loc[qid, "nDCG_csfcube@20"] == pytest.approx(dcg(grades) / dcg(sorted(grades, reverse=True)))
    assert list(table.index) == sorted(specter_run)


def test_specter_p_mrr_is_zero(cube, specter_run):
    # SPECTER ignores the instruction: the two facets of a seed get the same ranking of a shared pool
    _, collection = cube
    values = measures.p_mrr(collection.qrels, specter_run, collection.pairs, collection.relevance_level)
    assert len(values) == 32  # 16 seeds x 2 facets
    # two method queries have no document relevant for method but not for result: nothing to score
    assert sorted(values.index[values.isna()]) == ["174799296_method", "5052952_method"]
    assert (values.dropna() == 0.0).sum() == 30
    table = measures.judged_values(collection.qrels, specter_run, ["nDCG_csfcube@20"], 2)
    table["p-MRR"] = values
    assert table["p-MRR"].notna().sum() == 30
    assert _summary(collection, table)["p-MRR"] == {"background": 0.0, "method": 0.0, "result": 0.0, "all": 0.0}


def test_p_mrr_of_an_instruction_following_run(cube, specter_run):
    data, collection = cube
    seed = "929877"
    bg, me = f"{seed}_background", f"{seed}_method"
    assert collection.pairs[bg] == me and collection.pairs[me] == bg
    relevant = {q: {d for d, g in data.queries[q].grades.items() if g >= 2} for q in (bg, me)}
    changed_bg, changed_me = relevant[bg] - relevant[me], relevant[me] - relevant[bg]
    assert changed_bg and changed_me
    # background ranking: its own relevant docs first; method ranking: the background-only docs last
    run = {q: dict(s) for q, s in specter_run.items()}
    run[bg] = {d: (100.0 if d in changed_bg else 0.0) + s for d, s in run[bg].items()}
    run[me] = {d: (-100.0 if d in changed_bg else 0.0) + s for d, s in run[me].items()}
    values = measures.p_mrr(collection.qrels, run, collection.pairs, 2)
    assert values[bg] == pytest.approx(_pmrr(changed_bg, run[bg], run[me]))
    assert values[me] == pytest.approx(_pmrr(changed_me, run[me], run[bg]))
    assert values[bg] > 0.5  # each term is 1 - R_i/R_i' with R_i small and R_i' large
    reference = measures.p_mrr(collection.qrels, specter_run, collection.pairs, 2)
    pd.testing.assert_series_equal(values.drop(index=[bg, me]), reference.drop(index=[bg, me]))


def _annotator_run(data, slot):
    """Scores = the grades of each query's `slot`-th annotator: four values, ties everywhere."""
    return {qid: {doc: float(g) for doc, g in list(q.annotators.values())[slot].items()}
            for qid, q in data.queries.items()}


def test_human_reference_on_heavily_tied_runs(cube):
    # the Human row: rank each pool by one annotator's grades (ties by the kit's rule),
    # score against the adjudicated grades, average the two annotator slots per query
    data, collection = cube
    first, second = (measures.judged_values(collection.qrels, _annotator_run(data, s), ["nDCG_csfcube@20"], 2)
                     for s in (0, 1))
    assert not np.allclose(first, second)
    summary = _summary(collection, (first + second) / 2)["nDCG_csfcube@20"]
    assert _rounded(summary) == {"background": 0.8251, "method": 0.7160, "result": 0.7893, "all": 0.7759}
