"""The study API (`evalkit.study.steps`) as the notebooks use it: each run loaded and verified once
per notebook, the relevance table's tests the very tests of the one evaluation path (`compare`,
Holm over the family the notebook names), the long per-query form, the aggregate and the
intervals checked against hand-computed values."""

from __future__ import annotations

import json
import math
from collections import Counter

import pandas as pd
import pytest
from notebook_cells import run_cells

from evalkit import api
from evalkit.evaluation.compare import compare
from evalkit.evaluation.evaluate import per_query
from evalkit.evaluation.stats import holm, interval_or_nan, paired_test
from evalkit.pipeline import runner
from evalkit.study import params, rows, steps

SEEDS = "929877,3264891,1936997,11844559"  # eight queries: both folds' halves, four p-MRR pairs
MEASURE = "nDCG_csfcube@20"


def overlap(query, documents):
    words = set(query.text.lower().split())
    return [len(words & set(d.text.lower().split())) for d in documents]


def title_overlap(query, documents):
    words = set(query.text.lower().split())
    return [len(words & set(d.title.lower().split())) + 0.001 * len(d.text) for d in documents]


@pytest.fixture(scope="module")
def models():
    return api.register_model(overlap, "steps-words", revision="1"), \
        api.register_model(title_overlap, "steps-titles", revision="1")


@pytest.fixture
def study(models, tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("steps")
    monkeypatch.setenv("EVALKIT_CACHE", str(folder / "cache"))
    return params.check("relevance", PROFILE="offline", PROTOCOL="pool", MODELS=f"bm25,{models[0]},{models[1]}",
                        REFERENCE_MODEL="bm25", DISCOUNT="csfcube", SEEDS=SEEDS, OUTPUT_DIR=str(folder / "build"),
                        FIGURES_DIR=str(folder / "figures"), RUNS_DIR=str(folder / "runs"))


def counting(monkeypatch) -> Counter:
    """Count every verified load of a stored run (`runner.obtain`, as the study's rows call it)."""
    loads: Counter = Counter()
    real = rows.obtain

    def obtain(bound, **kwargs):
        loads[(bound.settings.model, bound.settings.variant)] += 1
        return real(bound, **kwargs)

    monkeypatch.setattr(rows, "obtain", obtain)
    return loads


@pytest.mark.parametrize("notebook", ["relevance", "instruction_following", "sensitivity"])
def test_each_notebook_loads_each_run_once(notebook, study, monkeypatch):
    chosen = params.check(notebook, PROFILE="offline", PROTOCOL="pool", MODELS=",".join(study.models),
                          REFERENCE_MODEL="bm25" if notebook == "relevance" else None,
                          DISCOUNT=None if notebook == "instruction_following" else "csfcube", SEEDS=SEEDS,
                          OUTPUT_DIR=str(study.output_dir), FIGURES_DIR=str(study.figures_dir),
                          RUNS_DIR=str(study.runs_dir), OFFICIAL="yes" if notebook == "relevance" else None)
    loads = counting(monkeypatch)
    run_cells(notebook, chosen)
    variants = {"sensitivity": 7}.get(notebook, 1)
    assert len(loads) == len(chosen.models) * variants and set(loads.values()) == {1}, loads


def test_the_relevance_tables_tests_are_the_one_evaluation_paths(study, collection):
    """p and p_holm of Table 1 are `compare`'s with the family ``reference`` on the same runs,
    computed here from the stored runs, apart from the study's steps; under ``pairs`` Holm
    counts three tests, not two, and p_holm differs where it is defined."""
    namespace = run_cells("relevance", study)
    table = namespace["relevance"].query("source == 'kit' and model != 'human'").set_index("model")
    judged = collection.select(study.queries(collection))
    made = {m: runner.obtain(runner.bind(study.settings(m, collection), collection, study.runs_dir)).run
            for m in study.models}
    tables = {m: per_query(judged, made[m], [MEASURE]) for m in study.models}
    expected = compare(judged, tables, [MEASURE], family="reference").query("stratum == 'all' and against != ''")
    expected = expected.set_index("run")
    for model in study.models[1:]:
        assert table.loc[model, "p_vs_reference"] == expected.loc[model, "p"]
        assert table.loc[model, "p_holm"] == expected.loc[model, "p_holm"]
        assert table.loc[model, "p_vs_reference"] == paired_test(tables[model][MEASURE], tables["bm25"][MEASURE]).pvalue
    raw = {m: expected.loc[m, "p"] for m in study.models[1:]}
    assert {m: table.loc[m, "p_holm"] for m in raw} == pytest.approx(holm(raw), nan_ok=True)
    pairs = compare(judged, tables, [MEASURE], family="pairs").query("stratum == 'all' and against == 'bm25'")
    assert len(compare(judged, tables, [MEASURE]).query("stratum == 'all' and against != ''")) == 3
    assert len(expected) == 2
    defined = [m for m in raw if not math.isnan(raw[m]) and raw[m] > 0]
    assert all(pairs.set_index("run").loc[m, "p_holm"] >= table.loc[m, "p_holm"] for m in defined)


def test_the_long_form_the_aggregate_and_the_intervals_by_hand(study, collection, data):
    runs = steps.load_runs(study, collection)
    values = steps.per_query(runs, [MEASURE])
    assert list(values.columns[:7]) == ["model", "label", "variant", "qid", "seed", "facet", "fold"]
    assert set(values.model) == set(study.models) and len(values) == 3 * 8
    one = values[values.model == "bm25"].set_index("qid")
    assert (one.seed + "_" + one.facet == one.index).all()
    # the aggregate: the mean of the two test-fold means (CSFCube), by hand
    folds = one.dropna(subset=["fold"]).groupby("fold")[MEASURE].mean()
    aggregated = steps.aggregate(values, collection).set_index(["model", "measure"])
    assert aggregated.loc[("bm25", MEASURE), "all"] == pytest.approx(100 * folds.mean())
    pmrr = one.groupby("facet")["p-MRR"].mean()
    assert aggregated.loc[("bm25", "p-MRR"), "all"] == pytest.approx(100 * pmrr.mean())
    # intervals: x100 of the bootstrap of the per-query fractions
    found = steps.intervals(values, MEASURE).set_index(["model", "facet"])
    low, high = interval_or_nan(one[MEASURE], seed=params.BOOTSTRAP_SEED)
    assert (found.loc[("bm25", "all"), "ci_low"], found.loc[("bm25", "all"), "ci_high"]) == (100 * low, 100 * high)
    human = steps.human(study, collection, data, [MEASURE])
    assert set(human.model) == {"human"} and set(human.qid) == set(one.index)
    assert list(human.columns[:4]) == ["model", "label", "variant", "recipe"]


def test_a_facet_alone_keeps_the_human_rows_to_its_queries(study, collection, data):
    runs = steps.load_runs(study, collection)
    method = collection.select([q for q in study.queries(collection) if q.endswith("_method")])
    values = steps.per_query(runs, [MEASURE])
    values = values[values.facet == "method"]
    human = steps.human(study, method, data, [MEASURE])
    assert set(human.qid) == set(values.qid) and len(set(values.qid)) == 2
    tests = steps.paired_tests(pd.concat([values, human]), method, [MEASURE], "bm25")
    tested = tests[tests.against != ""]
    assert (tested[tested.stratum.isin(["method", "all"])].n == 2).all() and (tested.stratum != "method").any()


def test_tests_without_the_reference_are_empty_and_say_so_in_the_table(study, collection, data):
    runs = steps.load_runs(study, collection, models=study.models[1:])
    values = steps.per_query(runs, [MEASURE])
    assert steps.paired_tests(values, collection, [MEASURE], "bm25").empty


def test_the_relevance_tables_tests_are_evalkit_evaluates(study, collection, capsys):
    """The same stored runs through `evalkit evaluate --family reference`: the very p and p_holm."""
    from evalkit import cli

    table = run_cells("relevance", study)["relevance"].query("source == 'kit' and model != 'human'")
    folders = [runner.bind(study.settings(m, collection), collection, study.runs_dir).folder for m in study.models]
    runs = [a for f in folders for a in ("--runs", str(f))]
    capsys.readouterr()  # the notebook's printing
    assert cli.main(["evaluate", "--dataset", "csfcube", *runs, "--measures", MEASURE, "--family", "reference",
                     "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["settings"]["holm_over"].startswith("each run against the reference")
    rows = [r for r in printed["rows"] if r["stratum"] == "all" and r["against"]]
    assert [r["against"] for r in rows] == [printed["reference"]] * 2  # the first run: bm25's folder
    for model, row in zip(study.models[1:], rows):  # in the order of --runs
        mine = table.set_index("model").loc[model]
        assert (row["p"], row["p_holm"]) == (mine["p_vs_reference"], mine["p_holm"])
