"""BM25 over title and body (bm25s), scoring the query text; instructions are ignored.

Settings as bm25s' published benchmark runs it (xhluca/bm25s README and its BEIR benchmark):
the Lucene variant with k1 = 1.5, b = 0.75, English stopwords and the Snowball English
stemmer (PyStemmer), applied to documents and queries alike. Every setting is recorded in
the run's sidecar (`describe`). Term statistics come from the candidates being ranked (a
given candidate list, or the whole corpus); the index of the last candidate set is reused.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import Stemmer

from evalkit.collection import Document, Query


class BM25:
    reads_instruction = False

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene", stopwords: str = "en",
                 stemmer: str | None = "english"):
        self.k1, self.b, self.method, self.stopwords, self.stemmer_name = k1, b, method, stopwords, stemmer
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self._indexed: tuple[tuple[str, ...], bm25s.BM25] | None = None

    def prepare(self, documents: Sequence[Document]) -> None:
        pass

    def _tokens(self, texts: list[str], return_ids: bool = True):
        return bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self._stemmer, return_ids=return_ids,
                              show_progress=False)

    def _index(self, candidates: Sequence[Document]) -> bm25s.BM25:
        ids = tuple(d.doc_id for d in candidates)
        if self._indexed is None or self._indexed[0] != ids:
            retriever = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            retriever.index(self._tokens([d.full_text for d in candidates]), show_progress=False)
            self._indexed = (ids, retriever)
        return self._indexed[1]

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        tokens = self._tokens([query.text], return_ids=False)[0]
        scores = self._index(candidates).get_scores(tokens)
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def describe(self) -> dict:
        return {"family": "bm25", "k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "stemmer": self.stemmer_name}
