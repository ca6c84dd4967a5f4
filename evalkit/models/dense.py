"""Embedding models: bi-encoders (instruction-agnostic or instructed) and multi-vector matching."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ot

from evalkit.csfcube import Paper
from evalkit.embeddings import Encoder
from evalkit.errors import KitError
from evalkit.instructions import Request


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

    def query_string(self, request: Request) -> str:
        return self.query_template.format(instruction=request.instruction, query=request.query_text)

    def doc_vectors(self, candidates: Sequence[Paper]) -> np.ndarray:
        return self.encoder.encode([self.doc_template.format(text=p.text) for p in candidates], "documents")

    def prepare(self, papers: Sequence[Paper]) -> None:
        self.doc_vectors(papers)

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        query = self.encoder.encode([self.query_string(request)], "queries")[0]
        scores = self.doc_vectors(candidates) @ query
        return {p.pid: float(s) for p, s in zip(candidates, scores)}

    def describe(self) -> dict:
        return {"family": "dense", "model": self.encoder.location, "revision": self.encoder.revision,
                "query_template": self.query_template, "doc_template": self.doc_template}


class MultiVector:
    """otAspire-like aspect-conditional matching of sentence embeddings.

    The seed's sentences of the requested facet (all its sentences if it has none) are
    matched against every sentence of a candidate: ``ot`` scores the negative optimal
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

    def _sentences(self, paper: Paper) -> list[str]:
        return [s.text for s in paper.sentences] or [paper.title]

    def prepare(self, papers: Sequence[Paper]) -> None:
        self.encoder.encode([s for p in papers for s in self._sentences(p)], "sentences")

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        seed_sentences = list(request.seed.facet_sentences(request.facet)) or self._sentences(request.seed)
        query = self.encoder.encode(seed_sentences, "queries")
        return {p.pid: self._match(query, self.encoder.encode(self._sentences(p), "sentences"))
                for p in candidates}

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
