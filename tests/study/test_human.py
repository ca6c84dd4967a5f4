"""The Human reference: the pool recipe and the protocol-aware recipe (each annotator ranks the
first-stage list the models rerank), on a hand-built example and on CSFCube."""

import pandas as pd
import pytest

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Document, Query
from evalkit.datasets.csfcube import annotators
from evalkit.evaluation.evaluate import PMRR, summarize
from evalkit.study import human

# One seed paper "s" annotated for two facets; its pool holds the seed itself (as two CSFCube queries do).
GRADES = {"s_background": {"s": 3, "d1": 3, "d2": 0, "d3": 2, "d4": 0},
          "s_method": {"s": 3, "d1": 0, "d2": 2, "d3": 0, "d4": 2}}
ANNOTATORS = {"s_background": {"ann1": {"s": 3, "d1": 3, "d2": 1, "d3": 0, "d4": 0},
                               "ann2": {"s": 3, "d1": 2, "d2": 0, "d3": 3, "d4": 0}},
              "s_method": {"ann1": {"s": 3, "d1": 0, "d2": 2, "d3": 0, "d4": 3},
                           "ann2": {"s": 3, "d1": 1, "d2": 2, "d3": 0, "d4": 0}}}
POOL = ("s", "d1", "d2", "d3", "d4")


@pytest.fixture
def tiny():
    data = {qid: tuple(ANNOTATORS[qid].values()) for qid in GRADES}  # each query's annotators' grades, in order
    collection = Collection(
        name="tiny", documents={d: Document(d, "", d) for d in (*POOL, "d5")},
        queries={qid: Query(qid, "seed text") for qid in GRADES}, qrels=GRADES, relevance_level=2,
        candidates={qid: POOL for qid in GRADES}, exclude={qid: "s" for qid in GRADES},
        pairs={"s_background": "s_method", "s_method": "s_background"},
        strata={qid: qid.split("_")[1] for qid in GRADES})
    return data, collection


def test_pool_recipe_by_hand(tiny):
    data, collection = tiny
    lists = human.pool_lists(collection)
    assert lists["s_background"] == ["d1", "d2", "d3", "d4"]  # the seed is never a candidate
    assert human.annotator_run(data, 0, lists)["s_background"] == {"d1": 3.0, "d2": 1.0, "d3": 0.0, "d4": 0.0}
    table = human.human_per_query(data, ["RR"], collection)
    assert table["RR"].tolist() == [1.0, 1.0]
    # p-MRR of background -> method, changed documents d1, d3 (ranks: ties by document id)
    # annotator 1: d1 1 vs 3 -> 1 - 1/3; d3 3 vs 4 -> 1 - 3/4;  annotator 2: d1 2 vs 2 -> 0; d3 1 vs 3 -> 1 - 1/3
    first, second = (2 / 3 + 1 / 4) / 2, (0 + 2 / 3) / 2
    assert table.loc["s_background", PMRR] == pytest.approx((first + second) / 2)


def test_protocol_recipe_ranks_the_first_stage_list_by_hand(tiny):
    data, collection = tiny
    lists = {"s_background": ["d2", "d3", "d5"], "s_method": ["d1", "d4"]}
    run = human.annotator_run(data, 0, lists)
    assert run["s_background"] == {"d2": 1.0, "d3": 0.0, "d5": human.UNJUDGED}  # d1 missed: not in the run
    table = human.human_per_query(data, ["RR"], collection, recipe="protocol", lists=lists)
    # background: annotator 1 ranks d2, d3, d5 -> RR 1/2; annotator 2 ranks d3 first -> 1
    # method: annotator 1 ranks d4 first -> 1; annotator 2 ranks d1 (graded 1) first -> 1/2
    assert table["RR"].tolist() == [0.75, 0.75]


def test_protocol_recipe_on_the_pool_protocol_is_the_pool_recipe(tiny):
    data, collection = tiny
    lists, described = human.protocol_lists(collection, "pool")
    assert lists == human.pool_lists(collection) and described == {"protocol": "pool"}
    pool = human.human_per_query(data, ["RR", "P@2"], collection)
    aware = human.human_per_query(data, ["RR", "P@2"], collection, recipe="protocol", protocol="pool")
    pd.testing.assert_frame_equal(pool, aware)


def test_on_csfcube_the_two_recipes_agree_on_the_pool_protocol(data, collection):
    names = ["nDCG_csfcube@20"]
    data = annotators(data)
    pool = human.human_per_query(data, names, collection)
    aware = human.human_per_query(data, names, collection, recipe="protocol", protocol="pool")
    pd.testing.assert_frame_equal(pool, aware)
    summary = summarize(collection, pool)
    assert round(100 * summary["nDCG_csfcube@20"]["all"], 2) == 77.38  # the paper: 77.91
    assert 0 < summary[PMRR]["all"] <= 1


def test_recipe_errors(tiny):
    data, collection = tiny
    with pytest.raises(KitError, match="unknown Human recipe 'best'"):
        human.human_per_query(data, ["RR"], collection, recipe="best")
    with pytest.raises(KitError, match="recipe=.pool.: ranks the judged pool"):
        human.human_per_query(data, ["RR"], collection, protocol="pooled")
    with pytest.raises(KitError, match="protocol='nope': choose one of"):
        human.protocol_lists(collection, "nope")
    with pytest.raises(KitError, match="full protocol needs corpus="):
        human.protocol_lists(collection, "full")
