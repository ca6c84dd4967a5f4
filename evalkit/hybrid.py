"""Facet-hybrid scoring: trade relevance against instruction following with one weight.

For an embedding model, a seed and a requested facet:

    score(c) = a * sim(whole seed, c) + (1 - a) * sim(seed's facet sentences, c)

``a = 1`` is the whole-abstract query (instruction-agnostic, p-MRR 0); ``a = 0`` the
Aspect-subset query. With ``candidate_facet`` the candidate side of the second term
is the candidate's own sentences of that facet (its whole text if it has none).
Both similarities are computed once per (query, candidate); a curve over a grid of
``a`` is then arithmetic. `a` is chosen on each official fold's dev half and
reported on its test half (`cross_validate`), never on the values it reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from evalkit.csfcube import CSFCube, Paper
from evalkit.evaluation import per_query
from evalkit.errors import KitError
from evalkit.instructions import Request, make_request
from evalkit.models.dense import BiEncoder
from evalkit.runs import Run

GRID = tuple(round(a, 1) for a in np.linspace(0.0, 1.0, 11))
FOLDS = ("fold1", "fold2")


class FacetHybrid:
    """The facet hybrid as a scorer over an embedding model (registry setting ``hybrid_alpha``).

    The whole-seed term scores the request as given (its variant's query text and
    instruction); the facet term scores the seed's facet sentences (the Aspect-subset
    request), against whole candidates or, with `candidate_facet`, the candidates'
    sentences of the same facet.
    """

    def __init__(self, model: BiEncoder, alpha: float, candidate_facet: bool = False):
        if not 0.0 <= alpha <= 1.0:
            raise KitError(f"hybrid_alpha={alpha} must lie in [0, 1]; fix the model settings")
        self.model, self.alpha, self.candidate_facet = model, float(alpha), candidate_facet
        self.reads_instruction = model.reads_instruction

    def prepare(self, papers: Sequence[Paper]) -> None:
        self.model.prepare(papers)

    def components(self, request: Request, candidates: Sequence[Paper]) -> tuple[dict, dict]:
        """(whole-seed similarities, facet-sentence similarities) per candidate."""
        whole = self.model.score(request, candidates)
        subset = make_request(request.seed, request.facet, "aspect-subset")
        if not self.candidate_facet:
            return whole, self.model.score(subset, candidates)
        texts = [" ".join(p.facet_sentences(request.facet)) or p.text for p in candidates]
        vectors = self.model.encoder.encode([self.model.doc_template.format(text=t) for t in texts], "candidate facets")
        query = self.model.encoder.encode([self.model.query_string(subset)], "queries")[0]
        return whole, {p.pid: float(s) for p, s in zip(candidates, vectors @ query)}

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        whole, facet = self.components(request, candidates)
        return combine({"q": whole}, {"q": facet}, self.alpha)["q"]

    def describe(self) -> dict:
        return {**self.model.describe(), "hybrid_alpha": self.alpha, "hybrid_candidate_facet": self.candidate_facet}


def components(model: FacetHybrid, data: CSFCube, candidates: dict[str, Sequence[Paper]]) -> tuple[Run, Run]:
    """Both terms for every query (base requests), so that any weight is arithmetic."""
    whole, facet = {}, {}
    for qid in tqdm(list(candidates), desc="hybrid components", unit="query"):
        query = data.queries[qid]
        request = make_request(data.papers[query.seed], query.facet, "base")
        whole[qid], facet[qid] = model.components(request, list(candidates[qid]))
    return whole, facet


def combine(whole: Run, facet: Run, alpha: float) -> Run:
    """The hybrid run for one weight `alpha` (a = 1 returns the whole-seed scores unchanged)."""
    if alpha == 1.0:
        return {qid: dict(scores) for qid, scores in whole.items()}
    return {qid: {d: alpha * s + (1 - alpha) * facet[qid][d] for d, s in scores.items()}
            for qid, scores in whole.items()}


def curve(data: CSFCube, whole: Run, facet: Run, grid: Sequence[float] = GRID,
          discount: str = "csfcube") -> dict[float, pd.DataFrame]:
    """Per-query tables for every weight of the grid."""
    return {a: per_query(data, combine(whole, facet, a), discount=discount) for a in grid}


def choose_alpha(dev: dict[float, pd.DataFrame], metric: str = "ndcg@20") -> float:
    """The weight with the highest dev p-MRR among those whose dev NDCG@20 is at least that of
    a = 1 (the whole-abstract query); ties go to the larger weight. Sees only dev rows."""
    reference = dev[1.0][metric].mean()
    allowed = [a for a, t in dev.items() if t[metric].mean() >= reference - 1e-12]
    return max(allowed, key=lambda a: (_mean(dev[a]["p-mrr"]), a))


def cross_validate(tables: dict[float, pd.DataFrame], folds: dict[str, Sequence[str]]) -> tuple[pd.DataFrame, dict]:
    """Per-query values of the cross-validated hybrid: each fold's test half scored with the
    weight chosen on its dev half. Returns the per-query table and {fold: chosen weight}."""
    chosen, parts = {}, []
    for fold in FOLDS:
        dev_ids = list(folds[f"{fold}_dev"])
        dev = {a: t[t.index.isin(dev_ids)] for a, t in tables.items()}
        chosen[fold] = choose_alpha(dev)
        test_ids = list(folds[f"{fold}_test"])
        parts.append(tables[chosen[fold]][tables[chosen[fold]].index.isin(test_ids)])
    return pd.concat(parts).sort_index(), chosen


def _mean(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.mean()) if len(values) else -math.inf
