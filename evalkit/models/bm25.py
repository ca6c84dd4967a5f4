"""BM25 over title and body (bm25s), scoring the query text; instructions are ignored.

Settings as bm25s' published benchmark runs it (xhluca/bm25s README and its BEIR benchmark):
the Lucene variant with k1 = 1.5, b = 0.75, English stopwords and the Snowball English
stemmer (PyStemmer), applied to documents and queries alike. Every setting is recorded in
the run's sidecar (`describe`). Term statistics come from the candidates being ranked (a
given candidate list, or the whole corpus); the index of the last candidate set is reused.

A query with no term left after stopwords (empty, blank, stopwords only), or candidates with
none, scores every candidate 0: the kit's tie rule then ranks them by document id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import bm25s
import Stemmer

from evalkit.collection import Document, Query
from evalkit.errors import KitError


class BM25:
    reads_instruction = False

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene", stopwords: str = "en",
                 stemmer: str | None = "english"):
        for name, value, low, high in (("k1", k1, 0, math.inf), ("b", b, 0, 1)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high \
                    or not math.isfinite(value):
                raise KitError(f"BM25 setting {name}={value!r} must be a finite number in [{low}, {high}]; "
                               "fix the model's registry entry")
        self.k1, self.b, self.method, self.stopwords, self.stemmer_name = k1, b, method, stopwords, stemmer
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self._indexed: tuple[tuple[str, ...], bm25s.BM25 | None] | None = None

    def prepare(self, documents: Sequence[Document]) -> None:
        pass

    def _tokens(self, texts: list[str], return_ids: bool = True):
        return bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self._stemmer, return_ids=return_ids,
                              show_progress=False)

    def _index(self, candidates: Sequence[Document]) -> bm25s.BM25 | None:
        """The index of the candidates; None when no candidate has a term."""
        ids = tuple(d.doc_id for d in candidates)
        if self._indexed is None or self._indexed[0] != ids:
            tokenized = self._tokens([d.full_text for d in candidates])
            retriever = None
            if tokenized.vocab:
                retriever = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
                retriever.index(tokenized, show_progress=False)
            self._indexed = (ids, retriever)
        return self._indexed[1]

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        tokens = (self._tokens([query.text], return_ids=False) or [[]])[0]
        index = self._index(candidates)
        if not tokens or index is None:
            return {d.doc_id: 0.0 for d in candidates}
        scores = index.get_scores(tokens)
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def describe(self) -> dict:
        return {"family": "bm25", "k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "stemmer": self.stemmer_name}
