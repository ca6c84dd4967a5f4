"""A collection's identity (`Collection.identity`, the run store's ``data_sha256``): the adapter's
checksum when it gives one, else a digest of the content, so a user's changed data is never
answered from a stored run."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evalkit.core.errors import KitError
from evalkit.data.collection import BASE, Collection, Document, Fold, Query, Sentence


def toy(**changes) -> Collection:
    """A user's collection as docs/adding-a-collection.md builds it: no checksum given."""
    documents = {"d1": Document("d1", "Graph networks", "message passing", (Sentence("message passing", "method"),)),
                 "d2": Document("d2", "Sentence embeddings", "contrastive training"),
                 "d3": Document("d3", "Parsing", "charts and grammars")}
    queries = {"q1": Query("q1", "graph models", "find methods"), "q2": Query("q2", "embeddings", "find results")}
    qrels = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d2": 1, "d3": 0}}
    settings = {"candidates": {q: tuple(g) for q, g in qrels.items()}, "measures": ("nDCG@10", "AP")}
    return Collection("toy", documents, queries, qrels, **{**settings, **changes})


def test_a_collection_without_checksum_is_identified_by_its_content():
    assert toy().checksum == ""
    assert len(toy().identity) == 64 and toy().identity == toy().identity  # deterministic across loads
    assert toy().identity == toy().content_sha256()


def test_an_adapters_checksum_is_kept_as_the_identity():
    """CSFCube's manifest sha256 (and every other adapter's) stays what keys its stored runs."""
    assert toy(checksum="abc123").identity == "abc123"


def with_document(collection: Collection, doc_id: str, **fields) -> Collection:
    return replace(collection, documents={**collection.documents,
                                          doc_id: replace(collection.documents[doc_id], **fields)})


@pytest.mark.parametrize("change", [
    lambda c: with_document(c, "d2", text="contrastive pre-training"),
    lambda c: with_document(c, "d2", title="Sentence vectors"),
    lambda c: with_document(c, "d1", sentences=(Sentence("message passing", "result"),)),
    lambda c: replace(c, queries={**c.queries, "q1": replace(c.queries["q1"], instruction="find results")}),
    lambda c: replace(c, queries={**c.queries, "q1": replace(c.queries["q1"], text="graph model")}),
    lambda c: replace(c, qrels={**c.qrels, "q2": {"d2": 2, "d3": 0}}),
    lambda c: replace(c, relevance_level=2),
    lambda c: replace(c, candidates={**c.candidates, "q2": ("d3", "d2")}),
    lambda c: replace(c, candidates=None),
    lambda c: replace(c, exclude={"q1": "d3"}),
    lambda c: replace(c, pairs={"q1": "q2"}),
    lambda c: replace(c, folds={"f1": Fold(("q1",), ("q2",))}),
    lambda c: replace(c, groups={"g": ("q1", "q2")}),
    lambda c: replace(c, strata={"q1": "method"}),
], ids=["doc text", "doc title", "sentence label", "instruction", "query text", "qrels", "relevance level",
        "candidate order", "no candidates", "exclusion", "pairs", "folds", "groups", "strata"])
def test_any_change_a_run_or_evaluation_reads_changes_the_identity(change):
    assert change(toy()).identity != toy().identity


def test_variant_queries_are_in_the_identity():
    """A variant's instruction (made by the collection's own function) is content too."""
    def shouted(query: Query, variant: str) -> Query:
        if variant == BASE:
            return query
        if query.qid == "q2":
            raise KitError("q2 has no loud variant")
        return replace(query, instruction=query.instruction.upper() + suffix[0])

    suffix = ["!"]
    loud = toy(variants=(BASE, "loud"), make_variant=shouted)
    first = loud.content_sha256()
    suffix[0] = "?"
    assert loud.content_sha256() != first
    assert toy(variants=(BASE, "loud"), make_variant=shouted).identity == loud.content_sha256()


def test_the_identity_is_computed_once_per_collection():
    collection = toy()
    first = collection.identity
    object.__setattr__(collection, "documents", {})  # what a second computation would see
    assert collection.identity == first
