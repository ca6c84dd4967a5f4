"""BM25 over title and abstract (bm25s), scoring the query text; instructions are ignored.

Term statistics come from the candidates being ranked (the judged pool, or the
whole corpus in the pooled protocol); the index of the last candidate set is reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s

from evalkit.collection import Document, Query


class BM25:
    reads_instruction = False

    def __init__(self, k1: float = 1.5, b: float = 0.75, stopwords: str = "en"):
        self.k1, self.b, self.stopwords = k1, b, stopwords
        self._indexed: tuple[tuple[str, ...], bm25s.BM25] | None = None

    def prepare(self, documents: Sequence[Document]) -> None:
        pass

    def _index(self, candidates: Sequence[Document]) -> bm25s.BM25:
        pids = tuple(d.doc_id for d in candidates)
        if self._indexed is None or self._indexed[0] != pids:
            retriever = bm25s.BM25(k1=self.k1, b=self.b)
            corpus = bm25s.tokenize([d.full_text for d in candidates], stopwords=self.stopwords, show_progress=False)
            retriever.index(corpus, show_progress=False)
            self._indexed = (pids, retriever)
        return self._indexed[1]

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        tokens = bm25s.tokenize([query.text], stopwords=self.stopwords, return_ids=False,
                                show_progress=False)[0]
        scores = self._index(candidates).get_scores(tokens)
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def describe(self) -> dict:
        return {"family": "bm25", "k1": self.k1, "b": self.b, "stopwords": self.stopwords}
