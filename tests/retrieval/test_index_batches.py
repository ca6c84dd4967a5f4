"""The vector index's batches (issue 47 item 2, issue 48 item 10): the model's batches are the
corpus's distinct model inputs in first-occurrence order, a fixed number at a time
(`vector_index.batch_plan`), encoded by the model alone. So a vector's bits are a function of the
corpus, never of what the embedding cache held, and documents of one model input (the text the
document template renders, not (title, text)) get one row's bytes: an exact tie.

The encoder here gives vectors that depend on the batch they are encoded in (as a real model's
last bits do: padding, kernel shapes), so a batch made of anything but the corpus shows."""

from __future__ import annotations

import numpy as np
import pytest

from evalkit.data.collection import Document
from evalkit.models.dense import BiEncoder
from evalkit.retrieval import vector_index
from evalkit.retrieval.corpus import Corpus
from evalkit.retrieval.embeddings import CachedVectors
from evalkit.retrieval.vector_index import batch_plan


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setattr(vector_index, "BATCH", 3)


class BatchSensitive:
    """An encoder (`BiEncoder`'s interface: ``encode`` through the embedding cache, ``compute`` the
    model alone) whose vector of a text moves with the size of the batch it is encoded in."""

    location, revision = "batch-sensitive", "1"

    def __init__(self):
        self.vectors = CachedVectors({"model": self.location})
        self.fingerprint = self.vectors.fingerprint
        self.calls: list[list[str]] = []

    def compute(self, texts) -> np.ndarray:
        self.calls.append(list(texts))
        rows = [[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32) + np.float32(1e-3) * len(texts)

    def encode(self, texts, desc: str = "texts") -> np.ndarray:
        return self.vectors.stack(list(texts), str, self.compute)


# d3 repeats d1's abstract under another title: under "{abstract}" they are one model input
DOCS = [Document("d0", "T", "alpha"), Document("d1", "T", "beta"), Document("d2", "T", "alpha"),
        Document("d3", "other title", "beta"), Document("d4", "T", "gamma"), Document("d5", "T", "delta"),
        Document("d6", "T", "gamma"), Document("d7", "T", "epsilon")]


def test_the_plan_is_the_distinct_inputs_in_first_occurrence_order_a_fixed_number_at_a_time():
    key = {"a": "a", "b": "b", "c": "c", "d": "d", "e": "e"}
    docs = [Document(f"x{i}", "", t) for i, t in enumerate("abacdbe")]
    plan = list(batch_plan(docs, 2, lambda d: key[d.text]))
    # by hand: [a b] (2 fresh: ends), [a c d] (a repeated; c, d fresh: ends), [b e] (the last)
    assert [[d.text for d in s.documents] for s in plan] == [["a", "b"], ["a", "c", "d"], ["b", "e"]]
    assert [[d.text for d in s.fresh] for s in plan] == [["a", "b"], ["c", "d"], ["e"]]
    assert [s.sources for s in plan] == [[0, 1], [0, 3, 4], [1, 6]]  # a row's own, or its input's first row
    resumed = list(batch_plan(docs, 2, lambda d: key[d.text], done=2))  # two rows committed: read, not planned
    assert resumed[:2] == [(0, docs[0]), (1, docs[1])] and [s.sources for s in resumed[2:]] == [[0, 3, 4], [1, 6]]
    assert [len(s.fresh) for s in batch_plan(docs, 2, None)] == [2, 2, 2, 1]  # no key: every document fresh


def built(scorer: BiEncoder) -> bytes:
    index = scorer.corpus_index(Corpus.of_documents(DOCS))
    return (index.folder / "vectors.bin").read_bytes()


def test_a_vector_depends_on_the_corpus_alone_not_on_what_the_cache_held(tmp_path, monkeypatch):
    clean = BiEncoder(BatchSensitive(), doc_template="{abstract}")
    want = built(clean)
    # by hand: the distinct inputs alpha beta gamma delta epsilon, 3 at a time, once each
    assert clean.encoder.calls == [["alpha", "beta", "gamma"], ["delta", "epsilon"]]
    rows = np.frombuffer(want, dtype=np.float32).reshape(len(DOCS), 3)
    assert rows[0, 2] == np.float32(1.0) + np.float32(3e-3) and rows[7, 2] == np.float32(1.0) + np.float32(2e-3)
    for same in ((0, 2), (1, 3), (4, 6)):  # one model input, one row's bytes: exact ties
        assert rows[same[0]].tobytes() == rows[same[1]].tobytes()

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "warm"))
    warm = BiEncoder(BatchSensitive(), doc_template="{abstract}")
    warm.doc_vectors(DOCS[3:5])  # a pool run before: beta and gamma in the cache, from a batch of 2
    assert built(warm) == want  # the index neither reads nor writes the cache
    assert warm.encoder.calls[1:] == clean.encoder.calls


def test_a_batch_ends_where_the_corpus_says_and_a_segment_of_repeats_there_is_committed(tmp_path):
    docs = [Document(f"x{i}", "", t) for i, t in enumerate("abcab" "de")]
    plan = list(batch_plan(docs, 2, lambda d: d.text, ends=(3, 5)))
    # by hand: [a b] (size), [c] (ends at 3), [a b] (repeats only: ends at 5), [d e] (size)
    assert [[d.text for d in s.documents] for s in plan] == [["a", "b"], ["c"], ["a", "b"], ["d", "e"]]
    assert [len(s.fresh) for s in plan] == [2, 1, 0, 2]
    corpus = Corpus.of_documents(docs, batch=2, ends=(3, 5))
    assert corpus.key != Corpus.of_documents(docs).key  # the batches make the vectors: part of the key
    scorer = BiEncoder(BatchSensitive(), doc_template="{abstract}")
    index = scorer.corpus_index(corpus)
    assert scorer.encoder.calls == [["a", "b"], ["c"], ["d", "e"]]
    rows = np.asarray(index.rows)
    assert (rows[3] == rows[0]).all() and (rows[4] == rows[1]).all() and index.ids == [d.doc_id for d in docs]


def test_a_pool_collections_index_holds_the_bits_a_pool_run_encoded_through_the_cache(collection):
    """A collection with candidate lists is indexed in the order and the batches in which a pool run
    over every query encodes its documents through the embedding cache (`runner.whole_corpus`), so a
    run that reads the index scores by the very vectors it did before (the study's tables unchanged);
    an index in the collection's own order, 4,096 at a time, gives other bits."""
    from evalkit.pipeline.runner import whole_corpus

    pooled = list({d.doc_id: d for q in collection.queries for d in collection.candidates_of(q)}.values())
    through_cache = BiEncoder(BatchSensitive()).doc_vectors(pooled)  # the pool run's old path, a cold cache
    index = BiEncoder(BatchSensitive()).corpus_index(whole_corpus(collection))
    row_of = {doc: row for row, doc in enumerate(index.ids)}
    assert np.array_equal(np.asarray(index.rows)[[row_of[d.doc_id] for d in pooled]], through_cache)
    assert len(index.ids) == len(collection.documents)
