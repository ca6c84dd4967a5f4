"""Facet-hybrid scoring: trade relevance against instruction following with one weight.

For an embedding model, a seed and a requested facet:

    score(c) = a * sim(whole seed, c) + (1 - a) * sim(seed's facet sentences, c)

``a = 1`` is the whole-abstract query (instruction-agnostic, p-MRR 0); ``a = 0`` the
Aspect-subset query. With ``candidate_facet`` the candidate side of the second term
is the candidate's own sentences of that facet (its whole text if it has none).
Both similarities are computed once per (query, candidate); a curve over a grid of
``a`` is then arithmetic. `a` is chosen on each fold's dev half and reported on its
test half (`evalkit.selection.cross_validate` with `alpha_chooser`), never on the values
it reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from evalkit import progress
from evalkit.collection import Collection, Document, Query
from evalkit.errors import KitError
from evalkit.evaluation import PMRR, per_query
from evalkit.models.dense import BiEncoder
from evalkit.runs import Run

GRID = tuple(round(a, 1) for a in np.linspace(0.0, 1.0, 11))


class FacetHybrid:
    """The facet hybrid as a scorer over an embedding model (registry setting ``hybrid_alpha``).

    The whole-seed term scores the query as given (its variant's text and instruction);
    the facet term scores the seed's facet sentences (`Query.facet_text`, the Aspect-subset
    query text, with the query's own instruction), against whole candidates or, with
    `candidate_facet`, the candidates' sentences of the same facet.
    """

    def __init__(self, model: BiEncoder, alpha: float, candidate_facet: bool = False):
        if not 0.0 <= alpha <= 1.0:
            raise KitError(f"hybrid_alpha={alpha} must lie in [0, 1]; fix the model settings")
        self.model, self.alpha, self.candidate_facet = model, float(alpha), candidate_facet
        self.reads_instruction = model.reads_instruction

    def prepare(self, documents: Sequence[Document]) -> None:
        self.model.prepare(documents)

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


def components(model: FacetHybrid, collection: Collection,
               candidates: dict[str, Sequence[Document]]) -> tuple[Run, Run]:
    """Both terms for every query (base queries), so that any weight is arithmetic."""
    whole, facet = {}, {}
    for qid in progress.bar(list(candidates), desc="hybrid components", unit="query"):
        whole[qid], facet[qid] = model.components(collection.query(qid), list(candidates[qid]))
    return whole, facet


def combine(whole: Run, facet: Run, alpha: float) -> Run:
    """The hybrid run for one weight `alpha` (a = 1 returns the whole-seed scores unchanged)."""
    if alpha == 1.0:
        return {qid: dict(scores) for qid, scores in whole.items()}
    return {qid: {d: alpha * s + (1 - alpha) * facet[qid][d] for d, s in scores.items()}
            for qid, scores in whole.items()}


def curve(collection: Collection, whole: Run, facet: Run, measure: str,
          grid: Sequence[float] = GRID) -> dict[float, pd.DataFrame]:
    """Per-query tables (`measure` and p-MRR) for every weight of the grid."""
    return {a: per_query(collection, combine(whole, facet, a), [measure]) for a in grid}


def alpha_chooser(measure: str):
    """The selection rule: the weight with the highest dev p-MRR among those whose dev `measure`
    is at least that of a = 1 (the whole-abstract query); ties go to the larger weight."""

    def choose(dev: dict[float, pd.DataFrame]) -> float:
        reference = dev[1.0][measure].mean()
        allowed = [a for a, t in dev.items() if t[measure].mean() >= reference - 1e-12]
        return max(allowed, key=lambda a: (_mean(dev[a][PMRR]), a))

    return choose


def _mean(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.mean()) if len(values) else -math.inf
