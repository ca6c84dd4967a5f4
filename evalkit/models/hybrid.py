"""The facet hybrid as a scorer (registry setting ``hybrid_alpha``): for an embedding model, a seed
and a requested facet,

    score(c) = a * sim(whole seed, c) + (1 - a) * sim(seed's facet sentences, c)

(`evalkit.study.hybrid_curve` computes both terms once and the curve over a grid of ``a``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from evalkit.core.errors import DataError
from evalkit.data.collection import Document, Query
from evalkit.data.runs import Run
from evalkit.models.dense import BiEncoder


class FacetHybrid:
    """The facet hybrid as a scorer over an embedding model (registry setting ``hybrid_alpha``).

    The whole-seed term scores the query as given (its variant's text and instruction);
    the facet term scores the seed's facet sentences (`Query.facet_text`, the Aspect-subset
    query text, with the query's own instruction), against whole candidates or, with
    `candidate_facet`, the candidates' sentences of the same facet.
    """

    def __init__(self, model: BiEncoder, alpha: float, candidate_facet: bool = False):
        if not 0.0 <= alpha <= 1.0:
            raise DataError("model settings", f"hybrid_alpha={alpha} must lie in [0, 1]; fix the model settings")
        self.model, self.alpha, self.candidate_facet = model, float(alpha), candidate_facet
        self.reads_instruction = model.reads_instruction

    def prepare(self, documents: Sequence[Document]) -> None:
        self.model.prepare(documents)

    def index_documents(self, corpus, executor=None) -> None:
        self.model.index_documents(corpus, executor)

    def components(self, query: Query, candidates: Sequence[Document]) -> tuple[dict, dict]:
        """(whole-seed similarities, facet-sentence similarities) per candidate."""
        whole = self.model.score(query, candidates)
        subset = replace(query, text=query.facet_text)
        if not self.candidate_facet:
            return whole, self.model.score(subset, candidates)
        texts = [" ".join(d.labelled(query.facet)) or d.full_text for d in candidates]
        scores = self.model.similarity(self.model.query_vector(subset), self.model.text_vectors(texts))
        return whole, {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        whole, facet = self.components(query, candidates)
        return combine({"q": whole}, {"q": facet}, self.alpha)["q"]

    def describe(self) -> dict:
        return {**self.model.describe(), "hybrid_alpha": self.alpha, "hybrid_candidate_facet": self.candidate_facet}


def combine(whole: Run, facet: Run, alpha: float) -> Run:
    """The hybrid run for one weight `alpha` (a = 1 returns the whole-seed scores unchanged)."""
    if alpha == 1.0:
        return {qid: dict(scores) for qid, scores in whole.items()}
    return {qid: {d: alpha * s + (1 - alpha) * facet[qid][d] for d, s in scores.items()}
            for qid, scores in whole.items()}


# The entry settings of the facet hybrid, and what it needs of a collection wherever an entry sets
# ``hybrid_alpha`` (whatever the family: `evalkit.models.registry.needs`).
SETTINGS = ("hybrid_alpha", "hybrid_candidate_facet")
NEEDS = frozenset({"sentences", "facets"})


def split(settings: dict) -> tuple[dict, dict]:
    """(the entry's settings without the hybrid's, the hybrid's settings)."""
    return ({k: v for k, v in settings.items() if k not in SETTINGS},
            {k: v for k, v in settings.items() if k in SETTINGS})


def over(model, hybrid: dict):
    """The facet hybrid over an embedding model when `hybrid` sets ``hybrid_alpha``, else the model."""
    if "hybrid_alpha" not in hybrid:
        return model
    return FacetHybrid(model, hybrid["hybrid_alpha"], hybrid.get("hybrid_candidate_facet", False))
