"""The one scoring interface every model implements, on any collection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from evalkit.data.collection import Document, Query


class Scorer(Protocol):
    """Scores candidates for a request; higher scores rank first."""

    #: True when the model reads the instruction (instructed embedders, LLM rerankers).
    reads_instruction: bool

    def prepare(self, documents: Sequence[Document]) -> None:
        """Optional bulk work before scoring (e.g. encode every candidate once)."""

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        """{candidate doc_id: score} for every candidate."""

    def describe(self) -> dict:
        """Settings that identify the model's output (for sidecars and cache keys)."""


def index_documents(scorer, corpus, executor=None) -> None:
    """Let `scorer` (and the scorers it wraps or reranks) take the vectors of `corpus`'s documents
    from the corpus's index (`evalkit.models.dense.BiEncoder.index_documents`); a scorer with no
    ``index_documents`` (BM25, an LLM's own judgments, a user's object) is left as it is."""
    method = getattr(scorer, "index_documents", None)
    if method is not None:
        method(corpus, executor)
