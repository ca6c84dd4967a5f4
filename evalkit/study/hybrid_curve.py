"""The facet-hybrid study: both terms once per (query, candidate), a curve over a grid of weights,
and the weight chosen on dev halves; the scorer itself is `evalkit.models.hybrid`.

Facet-hybrid scoring trades relevance against instruction following with one weight.

For an embedding model, a seed and a requested facet:

    score(c) = a * sim(whole seed, c) + (1 - a) * sim(seed's facet sentences, c)

``a = 1`` is the whole-abstract query (instruction-agnostic, p-MRR 0); ``a = 0`` the
Aspect-subset query. With ``candidate_facet`` the candidate side of the second term
is the candidate's own sentences of that facet (its whole text if it has none).
Both similarities are computed once per (query, candidate); a curve over a grid of
``a`` is then arithmetic. `a` is chosen on each fold's dev half and reported on its
test half (`evalkit.evaluation.selection.cross_validate` with `alpha_chooser`), never on the values
it reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalkit.core import progress
from evalkit.data.collection import Collection, Document
from evalkit.data.runs import Run
from evalkit.evaluation.evaluate import PMRR, per_query
from evalkit.models.hybrid import FacetHybrid, combine

GRID = tuple(round(a, 1) for a in np.linspace(0.0, 1.0, 11))


def components(model: FacetHybrid, collection: Collection,
               candidates: dict[str, Sequence[Document]]) -> tuple[Run, Run]:
    """Both terms for every query (base queries), so that any weight is arithmetic."""
    whole, facet = {}, {}
    for qid in progress.bar(list(candidates), desc="hybrid components", unit="query"):
        whole[qid], facet[qid] = model.components(collection.query(qid), list(candidates[qid]))
    return whole, facet


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
