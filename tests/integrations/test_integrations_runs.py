"""Runs and judgments as ranx and ir_measures objects (`evalkit.integrations`): the libraries'
figures on them equal the kit's, per query, on the release's SPECTER sample and on a run of
`evalkit.evaluate`; tied scores are ranked by the kit's rule, not the library's."""

from __future__ import annotations

import math

import ir_measures
import pytest
import ranx

from evalkit import api
from evalkit.core.errors import DataError, KitError, RequestError
from evalkit.evaluation import measures
from evalkit.integrations.ir_measures import to_ir_measures
from evalkit.integrations.ranx import ranx_metric, to_ranx

KIT = ["nDCG@20", "AP", "RR", "P@20", "R@20"]


def kit_values(collection, run, names=KIT):
    return measures.judged_values(collection.judged, run, names, collection.relevance_level)


def ranx_values(qrels, run, names, level):
    metrics = {ranx_metric(n, level): n for n in names}
    ranx.evaluate(qrels, run, list(metrics), save_results_in_run=True)
    return {name: dict(run.scores[metric]) for metric, name in metrics.items()}


def assert_equal(kit, other, names):
    for name in names:
        for qid, value in kit[name].items():
            assert other[name][qid] == pytest.approx(value, abs=1e-12), (name, qid)


def test_ranx_metric_names():
    assert ranx_metric("nDCG@20", 2) == "ndcg@20"
    assert ranx_metric("AP", 2) == "map-l2"
    assert ranx_metric("P@20", 2) == "precision@20-l2"
    with pytest.raises(KitError, match="no ranx equivalent"):
        ranx_metric("nDCG_csfcube@20", 2)


def test_ranx_and_ir_measures_give_the_kits_figures_on_the_specter_sample(collection, specter):
    kit = kit_values(collection, specter)
    qrels, run = to_ranx(specter, collection)
    assert isinstance(qrels, ranx.Qrels) and isinstance(run, ranx.Run)
    assert set(run.keys()) == set(specter)
    assert_equal(kit, ranx_values(qrels, run, KIT, collection.relevance_level), KIT)

    qrels_it, run_it = to_ir_measures(specter, collection)
    assert all(isinstance(q, ir_measures.Qrel) for q in qrels_it)
    names = [*KIT, "nDCG_csfcube@20", "MAP_csfcube"]
    by_measure = {measures.parse_measure(n, collection.relevance_level): n for n in names}
    found = {n: {} for n in names}
    for metric in ir_measures.iter_calc(list(by_measure), qrels_it, run_it):
        found[by_measure[metric.measure]][metric.query_id] = metric.value
    assert_equal(kit_values(collection, specter, names), found, names)


def test_the_kits_tie_rule_reaches_the_libraries(collection, specter_copy):
    # every score of one query tied: the kit ranks by document id ascending; the libraries' own
    # rule (trec_eval, ranx: id descending) gives other values, which keep_scores=True shows
    qid = next(iter(specter_copy))
    specter_copy[qid] = dict.fromkeys(specter_copy[qid], 1.0)
    kit = kit_values(collection, specter_copy, ["nDCG@20"])["nDCG@20"][qid]
    qrels, run = to_ranx(specter_copy, collection)
    assert ranx_values(qrels, run, ["nDCG@20"], 2)["nDCG@20"][qid] == pytest.approx(kit, abs=1e-12)
    qrels, raw = to_ranx(specter_copy, collection, keep_scores=True)
    assert not math.isclose(ranx_values(qrels, raw, ["nDCG@20"], 2)["nDCG@20"][qid], kit, abs_tol=1e-6)
    qrels_it, raw_it = to_ir_measures(specter_copy, collection, keep_scores=True)
    raw_value = next(m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 20], qrels_it, raw_it)
                     if m.query_id == qid)
    assert not math.isclose(raw_value, kit, abs_tol=1e-6)


def test_protocol_decides_the_judgments(collection, specter):
    # seed 8781666 is judged (grade 3) in its own background pool: judged under released only
    qid = "8781666_background"
    pool, _ = to_ranx(specter, collection, "pool")
    released, _ = to_ranx(specter, collection, "released")
    assert "8781666" not in pool.qrels[qid] and released.qrels[qid]["8781666"] == 3


def test_released_runs_rank_the_pools_as_released(collection, specter):
    """Under released the seed is a candidate (ranked and judged) and a document outside the pools
    is refused, as `evalkit evaluate --protocol released` rules (`check_protocol_run`); the
    libraries' inputs once took released runs without the candidate check and refused the seed."""
    qid = "8781666_background"
    with_seed = {q: dict(scores) for q, scores in specter.items()}
    with_seed[qid]["8781666"] = 1e9
    _, run = to_ranx(with_seed, collection, "released")
    ranked = run.to_dict()[qid]
    assert ranked["8781666"] == max(ranked.values())
    with pytest.raises(KitError, match="excluded document 8781666"):
        to_ranx(with_seed, collection, "pool")
    outside = {q: dict(scores) for q, scores in specter.items()}
    outside[qid]["not-a-candidate"] = 0.5
    for protocol in ("pool", "released"):
        with pytest.raises(KitError, match="outside the query's candidate list"):
            to_ranx(outside, collection, protocol)
    assert "not-a-candidate" in to_ranx(outside, collection, "pooled")[1].to_dict()[qid]


def test_bad_runs_are_refused_in_one_line(collection):
    with pytest.raises(KitError, match="unknown query"):
        to_ranx({"nope": {"1": 1.0}}, collection)
    with pytest.raises(KitError, match="expected"):
        to_ir_measures([("q", "d", 1.0)], collection)


def _with(specter, value):
    """The SPECTER run with one document's score replaced by `value`: (run, qid, doc)."""
    run = {qid: dict(scores) for qid, scores in specter.items()}
    qid = sorted(run)[0]
    doc = sorted(run[qid])[0]
    run[qid][doc] = value
    return run, qid, doc


@pytest.mark.parametrize("convert", [to_ranx, to_ir_measures])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "1.0", None, True])
def test_a_score_that_is_not_a_finite_number_is_refused_with_its_query(collection, specter, convert, value):
    run, qid, doc = _with(specter, value)
    with pytest.raises(DataError) as raised:
        convert(run, collection)
    assert str(raised.value).startswith(f"run: query {qid}: document {doc} has the score ")
    assert "give every document a finite number" in str(raised.value)


@pytest.mark.parametrize("convert", [to_ranx, to_ir_measures])
@pytest.mark.parametrize("run, text", [
    ("run.trec", "run: expected {qid: {doc: score}}, got a str"),
    (None, "run: expected {qid: {doc: score}}, got a NoneType"),
    ([("q", "d", 1.0)], "run: expected {qid: {doc: score}}, got a list"),
    ({}, "run: the run ranks no queries"),
    ({"Q": ["d"]}, "run: query Q: expected {doc: score}, got a list"),
    ({"Q": None}, "run: query Q: expected {doc: score}, got a NoneType"),
    ({"Q": {}}, "run: query Q ranks no document"),
])
def test_a_run_of_the_wrong_shape_is_one_line(collection, convert, run, text):
    with pytest.raises(DataError) as raised:
        convert(run, collection)
    assert str(raised.value).startswith(text) and "\n" not in str(raised.value)


@pytest.mark.parametrize("convert", [to_ranx, to_ir_measures])
def test_an_unknown_protocol_is_refused_before_the_run_is_read(collection, convert):
    with pytest.raises(RequestError) as raised:
        convert(None, collection, protocol="bogus")
    assert str(raised.value) == "protocol='bogus': choose one of pool, released, pooled, full"


def overlap(query, documents):
    """Words the query text shares with each candidate."""
    words = set(query.text.lower().split())
    return [len(words & set(d.full_text.lower().split())) for d in documents]


def test_an_evaluation_converts_to_ranx(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    result = api.evaluate(overlap, "csfcube", name="overlap", revision="1", seeds=["929877"],
                          measures=["nDCG@20", "AP"], aggregate="mean", runs_dir=tmp_path / "runs")
    qrels, run = result.to_ranx()
    values = ranx_values(qrels, run, ["nDCG@20", "AP"], 2)
    table = result.per_query.loc["base"]
    for qid in table.index:
        assert values["nDCG@20"][qid] == pytest.approx(table.loc[qid, "nDCG@20"], abs=1e-12)
        assert values["AP"][qid] == pytest.approx(table.loc[qid, "AP"], abs=1e-12)
    with pytest.raises(RequestError, match="variant='generic': this result has base"):
        result.to_ranx("generic")


def test_a_registered_measure_with_a_ranx_name_converts_without_editing_the_integration():
    """The ranx name is the declaration's (`MeasureSpec.ranx`): a measure added as
    docs/adding-a-measure.md says, declaring ``ranx=``, has a ranx metric; the kit's own all do
    where ranx computes the same thing, and one without is refused naming those that have one."""
    import ir_measures

    from evalkit.evaluation.measures import MeasureSpec, registry

    hits = MeasureSpec("Hits", "Hits@k", cutoff="needs", binary=True, library=ir_measures.Success, ranx="hits")
    with registry.registered(hits):
        assert ranx_metric("Hits@5", 2) == "hits@5-l2"
    for spec in registry.declarations():
        if spec.ranx is not None:
            name = spec.family + ("@10" if spec.cutoff == "needs" else "")
            assert ranx_metric(name, 1).startswith(spec.ranx)
    with pytest.raises(KitError, match="no ranx equivalent; use nDCG@k, AP"):
        ranx_metric("p-MRR", 2)
