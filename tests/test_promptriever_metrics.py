"""Promptriever / FollowIR / InstructIR metrics on fixtures with hand-computed values."""

import json
import math

import pytest

from evalkit.errors import KitError
from evalkit.promptriever import (
    DATASET_METRICS,
    changed_documents,
    followir_p_mrr,
    load_followir,
    per_query,
    robustness,
    score,
)


def test_map_at_1000_grade_one_is_relevant():
    qrels = {"q": {"a": 1, "b": 0, "c": 2, "d": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}  # d relevant but not retrieved
    # relevant: a, c, d (3). Precision at each retrieved relevant: a@1 1/1, c@3 2/3.
    # AP = (1 + 2/3) / 3 = 5/9
    assert score("robust04", qrels, run | {"q-changed": run["q"]}, pairs={"q": "q-changed"})[
        "map@1000"
    ] == pytest.approx(5 / 9)


def test_ndcg_at_5_graded_trec_discount():
    qrels = {"q": {"a": 1, "b": 0, "c": 2, "d": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}
    # DCG@5 = 1/log2(2) + 0/log2(3) + 2/log2(4) = 1 + 0 + 1 = 2
    # ideal grades 2, 1, 1, 0: 2/1 + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930
    expected = 2 / (2 + 1 / math.log2(3) + 0.5)  # 0.638788
    assert per_query(qrels, run, ["ndcg@5"]).loc["q", "ndcg@5"] == pytest.approx(expected)


def test_ndcg_cutoffs_5_and_10():
    qrels = {"q": {"f": 1}}
    run = {"q": {d: 6 - i for i, d in enumerate("abcdef")}}  # f ranks 6th
    # nDCG@5 = 0 (f is beyond the cut); nDCG@10 = (1/log2(7)) / (1/log2(2)) = 0.356207
    table = per_query(qrels, run, ["ndcg@5", "ndcg@10"])
    assert table.loc["q", "ndcg@5"] == 0.0
    assert table.loc["q", "ndcg@10"] == pytest.approx(1 / math.log2(7))
    assert score("beir", qrels, run) == {"ndcg@10": pytest.approx(0.356207, abs=1e-6)}


def test_mrr_at_10_msmarco_dev():
    qrels = {"q1": {"c": 1}, "q2": {"k": 1}}
    run = {
        "q1": {"a": 3.0, "b": 2.0, "c": 1.0},  # first relevant at rank 3: 1/3
        "q2": {d: 11 - i for i, d in enumerate("abcdefghijk")},  # k at rank 11: beyond @10, 0
    }
    # MRR@10 = (1/3 + 0) / 2 = 1/6
    assert score("msmarco-dev", qrels, run) == {"mrr@10": pytest.approx(1 / 6)}


def test_ties_use_the_kit_rule_not_the_library_rule():
    # Equal scores: the kit ranks doc id ascending, so "a" is first and RR = 1.
    # trec_eval / pytrec_eval would put "b" first (doc id descending) and give 1/2.
    qrels = {"q": {"a": 1}}
    run = {"q": {"b": 1.0, "a": 1.0}}
    assert score("msmarco-dev", qrels, run)["mrr@10"] == 1.0


def test_robustness_is_mean_of_group_minima():
    qrels = {"i1": {"x": 1}, "i2": {"x": 1}, "i3": {"x": 1}}
    run = {
        "i1": {"x": 3.0, "y": 2.0, "z": 1.0},  # x at rank 1: nDCG@10 = 1
        "i2": {"y": 3.0, "x": 2.0, "z": 1.0},  # x at rank 2: 1/log2(3) = 0.630930
        "i3": {"y": 3.0, "z": 2.0, "x": 1.0},  # x at rank 3: 1/log2(4) = 0.5
    }
    groups = {"umami": ("i1", "i2"), "fever": ("i3",)}
    # robustness@10 = (min(1, 0.630930) + 0.5) / 2 = 0.565465
    # nDCG@10 = (1 + 0.630930 + 0.5) / 3 = 0.710310
    result = score("instructir", qrels, run, groups=groups)
    assert result["robustness@10"] == pytest.approx((1 / math.log2(3) + 0.5) / 2)
    assert result["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3) + 0.5) / 3)


def test_robustness_needs_every_instance():
    with pytest.raises(KitError, match="no value for instance i2"):
        robustness({"i1": 1.0}, {"q": ("i1", "i2")})


def test_changed_documents_relevant_only_under_original():
    assert changed_documents({"a": 1, "b": 2, "c": 0, "d": 1}, {"a": 1, "b": 0, "c": 0}) == {"b", "d"}


def test_p_mrr_follows_the_pairing_table_not_the_id_suffixes():
    # The table pairs crosswise: q1-og with q2-changed and q2-og with q1-changed.
    pairs = {"q1-og": "q2-changed", "q2-og": "q1-changed"}
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
    # pair (q1-og, q2-changed): changed docs {d2}; R_og = 2 < R_changed = 4: 1 - 2/4 = 1/2
    # pair (q2-og, q1-changed): changed docs {d3}; R_og = 3 > R_changed = 1: 1/3 - 1 = -2/3
    # p-MRR = (1/2 - 2/3) / 2 = -1/12
    values = followir_p_mrr(qrels, run, pairs)
    assert values.to_dict() == pytest.approx({"q1-og": 0.5, "q2-og": -2 / 3})
    assert score("robust04", qrels, run, pairs=pairs)["p-mrr"] == pytest.approx(-1 / 12)
    # Pairing by suffix (q1-og with q1-changed, q2-og with q2-changed) would give
    # q1: docs {d1, d2}: (1 - 1/3 + 1 - 2/4) / 2 = 7/12; q2: docs {d3, d4}: (2/3 - 1 + 1 - 1/3) / 2 = 1/6
    # mean 3/8: a different number, so the table, not the names, decides.
    by_suffix = {"q1-og": "q1-changed", "q2-og": "q2-changed"}
    assert score("robust04", qrels, run, pairs=by_suffix)["p-mrr"] == pytest.approx(3 / 8)


def test_followir_fixture_end_to_end(tmp_path):
    def jsonl(name, records):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")

    jsonl("corpus.jsonl", [{"_id": f"d{i}", "text": f"doc {i}"} for i in range(1, 7)])
    jsonl(
        "queries.jsonl",
        [
            {"_id": "301", "text": "crime", "instruction_og": "any", "instruction_changed": "fraud only"},
            {"_id": "302", "text": "ozone", "instruction_og": "any", "instruction_changed": "1990s only"},
        ],
    )
    jsonl("top_ranked.jsonl", [{"qid": "301", "pid": ["d1", "d2", "d3"]}, {"qid": "302", "pid": ["d4", "d5", "d6"]}])
    (tmp_path / "qrels_og").mkdir()
    (tmp_path / "qrels_changed").mkdir()
    (tmp_path / "qrels_og" / "test.tsv").write_text("301\td1\t1\n301\td2\t1\n301\td3\t0\n302\td4\t2\n302\td5\t0\n")
    (tmp_path / "qrels_changed" / "test.tsv").write_text("301\td1\t1\n301\td2\t0\n301\td3\t0\n302\td4\t0\n")
    data = load_followir(tmp_path)
    run = {
        "301-og": {"d1": 0.9, "d2": 0.8, "d3": 0.7},  # d2 rank 2
        "301-changed": {"d2": 0.9, "d1": 0.8, "d3": 0.7},  # d2 rank 1
        "302-og": {"d5": 0.9, "d4": 0.8, "d6": 0.7},  # d4 rank 2
        "302-changed": {"d5": 0.9, "d6": 0.8, "d4": 0.7},  # d4 rank 3
    }
    # p-MRR: 301 changed docs {d2}: R_og 2 > R_changed 1: 1/2 - 1 = -1/2
    #        302 changed docs {d4}: R_og 2 < R_changed 3: 1 - 2/3 = 1/3
    #        mean (-1/2 + 1/3) / 2 = -1/12
    # MAP@1000 on the original instances: 301 d1@1, d2@2: (1 + 1) / 2 = 1; 302 d4@2: 1/2; mean 3/4
    result = score("robust04", data.qrels, run, pairs=data.pairs)
    assert result == {"map@1000": pytest.approx(0.75), "p-mrr": pytest.approx(-1 / 12)}


def test_every_dataset_has_metrics_and_unknown_dataset_fails():
    assert DATASET_METRICS["news21"] == ("ndcg@5", "p-mrr")
    assert DATASET_METRICS["robust04"] == DATASET_METRICS["core17"] == ("map@1000", "p-mrr")
    with pytest.raises(KitError, match="unknown dataset 'trec-covid'"):
        score("trec-covid", {}, {})


def test_followir_without_pairs_or_run_fails():
    with pytest.raises(KitError, match="needs pairs"):
        score("news21", {}, {})
    with pytest.raises(KitError, match="run lacks query b"):
        followir_p_mrr({}, {"a": {"x": 1.0}}, {"a": "b"})


def test_unjudged_queries_are_nan_not_zero():
    table = per_query({"a": {}, "b": {"x": 1}}, {"a": {"x": 1.0}, "b": {"x": 1.0}, "c": {"x": 1.0}}, ["ndcg@10"])
    assert table["ndcg@10"].isna().to_dict() == {"a": True, "b": False, "c": True}
