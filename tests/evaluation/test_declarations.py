"""Measures declare themselves: a family declared in a file of its own plus its registration is
parsed, computed and aggregated by the evaluator (`evalkit.evaluation.evaluate`), which reads
the declaration, not the name (tests/success_measure.py declares Success@k, Worst@k, Ranked)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from success_measure import RANKED, SUCCESS, WORST

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection, Fold, Query
from evalkit.evaluation import evaluate, measures
from evalkit.evaluation.measures import STRATUM_MEAN, MeasureSpec, registry

QRELS = {"q1": {"d1": 2, "d2": 0, "d3": 0}, "q2": {"d1": 0, "d2": 0, "d3": 2}, "q3": {"d1": 2},
         "q4": {"d2": 1, "d3": 3}}
RUN = {"q1": {"d1": 0.9, "d2": 0.5, "d3": 0.1},
       "q2": {"d1": 0.9, "d2": 0.8, "d3": 0.1},
       "q3": {"d3": 0.5, "d2": 0.5, "d1": 0.5},  # all tied: the kit's rule ranks d1, d2, d3
       "q4": {"d1": 0.9, "d2": 0.8}}
# Success@2 at grade >= 2: q1 1 (d1), q2 0 (d3 at 3), q3 1 (d1 by the tie rule), q4 0 (d2 has grade 1)
SUCCESS_2 = {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 0.0}


def _collection(candidates: bool = True) -> Collection:
    queries = {q: Query(q, f"query {q}") for q in QRELS}
    return Collection(name="tiny-declared", documents={}, queries=queries, qrels=QRELS, relevance_level=2,
                      candidates={q: ("d1", "d2", "d3") for q in QRELS} if candidates else None,
                      folds={"f1": Fold(dev=("q2", "q4"), test=("q1", "q3")),
                             "f2": Fold(dev=("q1", "q3"), test=("q2", "q4"))},
                      strata={"q1": "a", "q2": "a", "q3": "a", "q4": "b"}, measures=("Success@2",))


def test_a_declared_measure_is_unknown_until_registered():
    with pytest.raises(KitError, match="unknown measure 'Success@2'"):
        measures.parse("Success@2")
    with measures.registered(SUCCESS):
        assert measures.parse("Success@2") == measures.Parsed(SUCCESS, "Success@2", 2)
        assert "Success@k" in measures.measure_help()
        with pytest.raises(KitError, match="needs a cut-off; write e.g. Success@20"):
            measures.parse("Success")
    assert SUCCESS not in measures.declarations()
    with pytest.raises(KitError, match="unknown measure"):
        evaluate.check_measures(["Success@2"], _collection())


def test_a_registered_ranking_measure_is_computed_and_aggregated_by_the_evaluator():
    collection = _collection()
    with measures.registered(SUCCESS):
        evaluate.check_measures(["Success@2"], collection)
        table = evaluate.per_query(collection, RUN)  # the collection's own measures: Success@2
        assert table["Success@2"].to_dict() == SUCCESS_2
        # fold mean of the test halves: f1 (q1, q3) 1, f2 (q2, q4) 0; a: f1 1, f2 0; b: f2 only, 0
        assert evaluate.summarize(collection, table) == {"Success@2": {"a": 0.5, "b": 0.0, "all": 0.5}}
        plain = evaluate.summary_of(collection, table, ["Success@2"], "mean", {})
        assert plain["Success@2"] == pytest.approx({"a": 2 / 3, "b": 0.0, "all": 0.5})
    # declared to aggregate as the mean of the stratum means, the same values add up differently
    by_stratum = replace(SUCCESS, aggregate=STRATUM_MEAN)
    with measures.registered(by_stratum):
        summary = evaluate.summarize(collection, evaluate.per_query(collection, RUN))
        assert summary["Success@2"] == pytest.approx({"a": 2 / 3, "b": 0.0, "all": 1 / 3})


def test_a_one_value_measure_reads_its_inputs_and_a_column_measure_its_collection():
    collection = _collection()
    with measures.registered(SUCCESS), measures.registered(WORST), measures.registered(RANKED):
        names = ["Worst@2", "Ranked"]
        evaluate.check_measures(names, collection)
        computed = evaluate.computed_measures(names)
        assert computed == ["Ranked", "Success@2"] and evaluate.compared_measures(names) == ["Ranked"]
        table = evaluate.per_query(collection, RUN, computed)
        assert table["Ranked"].to_dict() == {"q1": 3.0, "q2": 3.0, "q3": 3.0, "q4": 2.0}
        summary = evaluate.summary_of(collection, table, names, "folds", {})
        assert summary["Worst@2"] == {"all": 0.0}
        assert summary["Ranked"]["all"] == pytest.approx((3.0 + (3.0 + 2.0) / 2) / 2)  # f1 3, f2 2.5
        assert "Ranked" not in evaluate.per_query(collection, RUN, ["Success@2"])  # asked for, not always
        with pytest.raises(KitError, match="Ranked needs given candidate lists; tiny-declared has none"):
            evaluate.check_measures(["Ranked"], _collection(candidates=False))
        with pytest.raises(KitError, match="not computed from one query's ranking"):
            measures.judged_values(QRELS, RUN, ["Ranked"], 2)


def test_declarations_are_checked_and_names_stay_one_measure():
    with pytest.raises(KitError, match="exactly one way"):
        MeasureSpec("Both", "Both", library=measures.BUILT_IN[0].library, value=lambda c, t, k: 0.0)
    with pytest.raises(KitError, match="column measure takes no cut-off"):
        replace(RANKED, cutoff=measures.OPTIONAL)
    with pytest.raises(KitError, match="no '@' or '%'"):
        MeasureSpec("Bad@1", "Bad@1", build=SUCCESS.build)
    with pytest.raises(KitError, match="declared already"):
        measures.register(replace(SUCCESS, family="nDCG"))
    with pytest.raises(KitError, match="cannot be unregistered"):
        measures.unregister(measures.BUILT_IN[0])
    assert measures.register(measures.BUILT_IN[0]) is measures.BUILT_IN[0]  # the same declaration: nothing added
    assert len(registry.declarations()) == len(measures.BUILT_IN)


def test_the_kit_help_and_every_name_come_from_the_declarations():
    # every declaration's help, once, in registration order (a new kit measure is listed last, pinning nothing here)
    helps = list(dict.fromkeys(spec.help for spec in measures.BUILT_IN))
    assert measures.MEASURE_HELP == ", ".join(helps[:-1]) + f" or {helps[-1]}"
    assert measures.MEASURE_HELP.startswith("nDCG@k, nDCG_csfcube@k, nDCG_csfcube%p, MAP_csfcube, AP[@k], RR[@k], P@k")
    for spec in measures.BUILT_IN:
        name = spec.help.replace("[@k]", "").replace("@k", "@10").replace("%p", "%20")
        assert measures.parse(name).spec is spec
