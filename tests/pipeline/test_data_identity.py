"""The run store keys a user's collection by its content: a run is made again after a document's
text changes, and reused while the data is the same (`Collection.identity`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evalkit.data.collection import Collection, Document, Query
from evalkit.pipeline.runner import RunSettings, bind, obtain


def load_toy() -> Collection:
    """The toy collection of docs/adding-a-collection.md, as its loader returns it (no checksum)."""
    documents = {"d1": Document("d1", "Graph networks", "message passing on graph models"),
                 "d2": Document("d2", "Sentence embeddings", "contrastive training of embeddings"),
                 "d3": Document("d3", "Parsing", "charts and grammars")}
    queries = {"q1": Query("q1", "graph models", "find methods"), "q2": Query("q2", "embeddings", "find results")}
    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d2": 1, "d3": 0}}
    collection = Collection("toy", documents, queries, qrels, relevance_level=1,
                            candidates={q: tuple(grades) for q, grades in qrels.items()}, measures=("nDCG@10", "AP"))
    collection.check()
    return collection


@pytest.fixture
def made(executions, monkeypatch, tmp_path):
    """The runs actually made (not reused; `executions`), with a fresh embedding cache."""
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    return executions


def test_a_changed_document_is_run_again_unchanged_data_is_reused(made, tmp_path):
    settings = RunSettings(model="bm25", dataset="toy")
    runs = tmp_path / "runs"
    first = obtain(bind(settings, load_toy(), runs)).run
    again = obtain(bind(settings, load_toy(), runs)).run  # loaded again, the same data: reused
    assert len(made) == 1 and again == first
    toy = load_toy()
    changed = replace(toy, documents={**toy.documents, "d3": replace(toy.documents["d3"],
                                                                     text="graph models and grammars")})
    fresh = obtain(bind(settings, changed, runs)).run
    assert len(made) == 2  # old code: reused (data_sha256 "" both times), the old numbers
    assert fresh["q1"]["d3"] != first["q1"]["d3"]
