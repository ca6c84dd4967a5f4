"""Embedding models: bi-encoders (instruction-agnostic or instructed) and multi-vector matching."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ot

from evalkit.collection import Document, Query
from evalkit.embeddings import Encoder
from evalkit.errors import KitError


class BiEncoder:
    """Cosine similarity of one query vector and one vector per candidate (title + abstract).

    The query text is ``query_template.format(instruction=..., query=...)``: ``{query}``
    alone makes an instruction-agnostic model; a template with ``{instruction}`` is an
    instructed embedder (GritLM, E5-instruct, Promptriever) or, for a model never
    trained on instructions, a prompt-sensitivity probe.
    """

    def __init__(self, encoder: Encoder, query_template: str = "{query}", doc_template: str = "{text}"):
        for name, template, field in (("query_template", query_template, "{query}"),
                                      ("doc_template", doc_template, "{text}")):
            if field not in template:
                raise KitError(f"{name} {template!r} must contain {field}; fix the model config")
        self.encoder = encoder
        self.query_template = query_template
        self.doc_template = doc_template
        self.reads_instruction = "{instruction}" in query_template

    def query_string(self, query: Query) -> str:
        return self.query_template.format(instruction=query.instruction, query=query.text)

    def doc_vectors(self, candidates: Sequence[Document]) -> np.ndarray:
        return self.encoder.encode([self.doc_template.format(text=d.full_text) for d in candidates], "documents")

    def prepare(self, documents: Sequence[Document]) -> None:
        self.doc_vectors(documents)

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        vector = self.encoder.encode([self.query_string(query)], "queries")[0]
        scores = self.doc_vectors(candidates) @ vector
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def describe(self) -> dict:
        return {"family": "dense", "model": self.encoder.location, "revision": self.encoder.revision,
                "query_template": self.query_template, "doc_template": self.doc_template}


class MultiVector:
    """otAspire-like aspect-conditional matching of sentence embeddings.

    The query's focus sentences (the seed's sentences of the requested facet, all its
    sentences if it has none) are matched against every sentence of a candidate: ``ot`` scores the negative optimal
    transport cost (uniform weights, Euclidean cost, as otAspire), ``maxsim`` the mean
    over seed sentences of the best cosine similarity.
    """

    reads_instruction = False
    MATCHINGS = ("ot", "maxsim")

    def __init__(self, encoder: Encoder, matching: str = "ot"):
        if matching not in self.MATCHINGS:
            raise KitError(f"unknown matching {matching!r}; choose one of {', '.join(self.MATCHINGS)}")
        self.encoder = encoder
        self.matching = matching

    def _sentences(self, document: Document) -> list[str]:
        return [s.text for s in document.sentences] or [document.title]

    def prepare(self, documents: Sequence[Document]) -> None:
        self.encoder.encode([s for d in documents for s in self._sentences(d)], "sentences")

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        vectors = self.encoder.encode(list(query.focus_sentences) or [query.seed.title], "queries")
        return {d.doc_id: self._match(vectors, self.encoder.encode(self._sentences(d), "sentences"))
                for d in candidates}

    def _match(self, query: np.ndarray, doc: np.ndarray) -> float:
        if self.matching == "maxsim":
            return float((query @ doc.T).max(axis=1).mean())
        cost = ot.dist(query.astype(np.float64), doc.astype(np.float64), metric="euclidean")
        weights_q = np.full(len(query), 1.0 / len(query))
        weights_d = np.full(len(doc), 1.0 / len(doc))
        return -float(ot.emd2(weights_q, weights_d, cost))

    def describe(self) -> dict:
        return {"family": "multivector", "model": self.encoder.location, "revision": self.encoder.revision,
                "matching": self.matching}
