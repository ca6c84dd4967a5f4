"""Whole-corpus retrieval: each query's top ``k`` of a corpus, equal to scoring every document.

One path for every collection without candidate lists (BEIR, MS MARCO, ``irds:`` ids) and for
the first stage of the pooled and full protocols (`rank_corpus`, the entry point the runner
calls). A scorer that can search an index (`can_search`/`search`: the bi-encoders, BM25) ranks
all queries at once; any other scorer scores every document per query, as before.

The dense index those scorers search is `evalkit.retrieval.vector_index` (a resumable on-disk
file of document vectors, verified at open); what makes its blocked search exact (the float32
error bound, each block's hits on the CPU or a GPU, the tie rule over rows) is
`evalkit.retrieval.exact_search`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalkit.core import progress
from evalkit.core.errors import DataError
from evalkit.core.hashing import files_sha256
from evalkit.data.collection import Document, Query
from evalkit.data.runs import ranked

DTYPES = ("float32", "float16")  # what an index may store its vectors as (`rank_corpus`'s dtype)
CHUNK = 512  # texts a model encodes in one call where the embedding cache fills (`CachedVectors.get`)


@dataclass(frozen=True)
class Corpus:
    """Documents in a fixed order, read as a stream (`read()`), identified by `key` (a checksum).

    `batch` and `ends` say how an index encodes it (`evalkit.retrieval.vector_index.batch_plan`):
    `batch` distinct model inputs per batch (None: the index's own size) and a batch always ending
    after the documents counted in `ends` (both part of the key, since they make the vectors)."""

    key: str
    read: Callable[[], Iterable[Document]]
    size: int | None = None  # when known (progress bars)
    name: str = "corpus"
    batch: int | None = None
    ends: tuple[int, ...] = ()

    @classmethod
    def of_documents(cls, documents: Sequence[Document], name: str = "corpus", batch: int | None = None,
                     ends: tuple[int, ...] = ()) -> Corpus:
        """An in-memory corpus, keyed by sha256 over every document's id, title and body (and its
        `batch` and `ends`, where set)."""
        digest = hashlib.sha256()
        for d in documents:
            digest.update(json.dumps([d.doc_id, d.title, d.text]).encode())
            digest.update(b"\n")
        if batch is not None or ends:
            digest.update(json.dumps({"batch": batch, "ends": list(ends)}).encode())
        docs = list(documents)
        return cls(digest.hexdigest(), lambda: docs, len(docs), name, batch, tuple(ends))

    @classmethod
    def of_file(cls, path: Path, reader: Callable[[Path], Iterator[Document]]) -> Corpus:
        """A corpus file streamed by `reader` (an adapter's), keyed by the file's sha256."""
        path = Path(path)
        if not path.is_file():
            raise DataError(path, "corpus file not found; check {corpus}")
        return cls(files_sha256([path]), lambda: reader(path), None, path.name)



def rank_corpus(scorer, queries: Sequence[Query], corpus: Corpus, k: int, exclude: Mapping[str, str] | None = None,
                dtype: str = "float32", executor=None) -> dict[str, dict[str, float]]:
    """Each query's top `k` documents of `corpus` with their scores, exactly as scoring every
    document (its `exclude`d one left out) and ranking by the tie rule: an index search where
    the scorer has one (`dtype`: its vectors' on disk; `executor`: who encodes and searches it,
    `evalkit.retrieval.executors`, this process by default), else every document scored per
    query, here."""
    exclude = exclude or {}
    excluding = any(q.qid in exclude for q in queries)
    if getattr(scorer, "can_search", lambda excluding: False)(excluding):
        if executor is None:  # a scorer of a user's may know no executor
            return scorer.search(list(queries), corpus, k, exclude, dtype)
        return scorer.search(list(queries), corpus, k, exclude, dtype, executor=executor)
    documents = list(corpus.read())
    scorer.prepare(documents)
    lists = [[d for d in documents if d.doc_id != exclude[q.qid]] if q.qid in exclude else documents
             for q in queries]
    score_many = getattr(scorer, "score_many", None)  # scorers that rank many queries at once (LLM rerankers)
    together = iter(score_many(list(queries), lists)) if score_many else None
    out = {}
    for query, candidates in zip(progress.bar(queries, desc=f"scoring {corpus.name}", unit="query"), lists):
        scores = next(together) if together else scorer.score(query, candidates)
        out[query.qid] = {d: scores[d] for d in ranked(scores)[:k]}
    return out



def documents_of(corpus: Corpus, ids: set[str]) -> dict[str, Document]:
    """The documents of `corpus` whose ids are in `ids` (one more streaming pass)."""
    return {d.doc_id: d for d in corpus.read() if d.doc_id in ids}
