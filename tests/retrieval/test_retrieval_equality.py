"""Whole-corpus rankings equal the exhaustive ones: every document scored by `score`, ranked by
the kit's tie rule (score descending, then document id), cut to the top `KEEP` (or `depth`).

The reference here is the exhaustive path itself (`scorer.score` over the whole corpus, then
`ranked`), so these tests hold the index search to it: collections with planted ties at the
cut-off (integer vectors: every score is exact in float32, so ties are ties whatever the
arithmetic), inner product and L2, an excluded document per query, the pooled protocol's
first stage, and BM25 (duplicated documents tie).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fixtures_retrieval import bm25_collection, exhaustive, planted, table_scorer

from evalkit.data.runs import ranked, read_trec
from evalkit.data.runstore import RANKING, SIDECAR
from evalkit.models import registry
from evalkit.models.bm25 import BM25
from evalkit.models.family import Family
from evalkit.pipeline import runner
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain

KEEP = 40  # the cut-off in these tests (the runner's KEEP, patched): well inside the planted ties










def assert_same(got: dict, want: dict) -> None:
    """The same documents in the same order with the same scores, to the last bit (a document's
    score is a function of its own vector: `BiEncoder.similarity`)."""
    assert got == want


def as_list(run: dict) -> dict:
    return {qid: [(d, scores[d]) for d in ranked(scores)] for qid, scores in run.items()}


@pytest.fixture()
def planted_family(monkeypatch, tmp_path):
    """A registry family "planted" whose model reads vectors from a table set by the test: the
    tables and a registry value with the family."""
    tables = {}
    family = Family("planted",
                    lambda settings, profile, collection: table_scorer(tables[collection.name], settings["metric"]))
    models = {"ip": {"family": "planted", "metric": "cosine"}, "l2": {"family": "planted", "metric": "l2"},
              "bm25": {"family": "bm25"}}
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "ip", "depth": 25, "models": models}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(runner, "KEEP", KEEP)
    return tables, registry.load().with_family(family)


@pytest.mark.parametrize("kind", ["ties", "gaussian"])
@pytest.mark.parametrize("model, metric", [("ip", "cosine"), ("l2", "l2")])
def test_whole_corpus_run_equals_the_exhaustive_ranking(planted_family, tmp_path, kind, model, metric):
    collection, table = planted(kind)
    tables, models = planted_family
    tables[collection.name] = table
    bound = bind(RunSettings(model=model, dataset=collection.name, profile="test"), collection, tmp_path, models)
    folder = obtain(bound, Reuse.NEVER).folder
    got = as_list(read_trec(folder / RANKING))
    want = exhaustive(table_scorer(table, metric), collection, KEEP)
    assert_same(got, want)
    if kind == "ties":  # the cut-off falls inside a tie in some query: the test can tell id order apart
        scores = [[s for _, s in exhaustive(table_scorer(table, metric), collection, KEEP + 1)[q]]
                  for q in collection.queries]
        assert any(row[KEEP - 1] == row[KEEP] for row in scores)


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_an_excluded_document_is_never_ranked_and_the_rest_is_unchanged(planted_family, tmp_path, metric):
    collection, table = planted("ties", seed=1)
    first = exhaustive(table_scorer(table, metric), collection, 1)
    exclude = {qid: found[0][0] for qid, found in first.items()}  # each query's best document
    from dataclasses import replace

    collection = replace(collection, exclude=exclude)
    tables, models = planted_family
    tables[collection.name] = table
    model = "ip" if metric == "cosine" else "l2"
    bound = bind(RunSettings(model=model, dataset=collection.name, profile="test"), collection, tmp_path, models)
    folder = obtain(bound, Reuse.NEVER).folder
    got = as_list(read_trec(folder / RANKING))
    assert got == exhaustive(table_scorer(table, metric), collection, KEEP, exclude)
    assert all(exclude[qid] not in dict(found) for qid, found in got.items())


@pytest.mark.parametrize("kind", ["ties", "gaussian"])
def test_pooled_first_stage_keeps_the_exhaustive_top_depth(planted_family, tmp_path, kind):
    collection, table = planted(kind, seed=2)
    tables, models = planted_family
    tables[collection.name] = table
    settings = RunSettings(model="ip", dataset=collection.name, profile="test", protocol="pooled", depth=25)
    folder = obtain(bind(settings, collection, tmp_path, models), Reuse.NEVER).folder
    got = read_trec(folder / RANKING)  # the model is its own first stage: its run rescores the top 25
    want = exhaustive(table_scorer(table, "cosine"), collection, 25)
    assert {qid: set(scores) for qid, scores in got.items()} == {qid: {d for d, _ in found}
                                                                 for qid, found in want.items()}
    for qid, found in want.items():  # rescored over 25 rows: the same scores as over the corpus
        assert [got[qid][d] for d, _ in found] == [s for _, s in found]
    assert json.loads((folder / SIDECAR).read_text())["corpus_size"] == len(collection.documents)


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_a_documents_score_does_not_depend_on_what_is_scored_beside_it(metric):
    """BLAS matrix-vector kernels round a row's dot product by its position (this machine's
    OpenBLAS differs on a few of these rows between the matrix and a subset); `similarity` must
    not, or a search's rescored shortlist and a pool would score one document differently."""
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((1500, 768)).astype(np.float32)
    query = rng.standard_normal(768).astype(np.float32)
    scorer = table_scorer({}, metric)
    whole = scorer.similarity(query, matrix)
    for rows in (np.sort(rng.choice(1500, 333, replace=False)), rng.permutation(1500), np.arange(3, 1500)):
        assert scorer.similarity(query, matrix[rows]).tolist() == whole[rows].tolist()
    assert [scorer.similarity(query, matrix[i:i + 1])[0] for i in range(0, 1500, 7)] == whole[::7].tolist()




def test_bm25_whole_corpus_run_equals_the_exhaustive_ranking(planted_family, tmp_path):
    collection = bm25_collection()
    bound = bind(RunSettings(model="bm25", dataset=collection.name, profile="test"), collection, tmp_path)
    folder = obtain(bound, Reuse.NEVER).folder
    got = as_list(read_trec(folder / RANKING))
    want = exhaustive(BM25(), collection, KEEP)
    assert got == want
    scores = [[s for _, s in exhaustive(BM25(), collection, KEEP + 1)[q]] for q in collection.queries]
    assert any(row[KEEP - 1] == row[KEEP] for row in scores)  # a tie straddles the cut-off


def test_bm25_on_the_beir_fixture_equals_the_exhaustive_ranking(planted_family, tmp_path):
    from fixtures_datasets import write_beir

    from evalkit.datasets.beir import load_beir

    collection = load_beir(write_beir(tmp_path / "scifact-mini"))
    bound = bind(RunSettings(model="bm25", dataset=collection.name, profile="test"), collection, tmp_path)
    folder = obtain(bound, Reuse.NEVER).folder
    assert as_list(read_trec(folder / RANKING)) == exhaustive(BM25(), collection, KEEP)
