"""``nDCG_csfcube@k`` and ``nDCG_csfcube%p``: the official CSFCube script's NDCG (docs/design.md, section 3).

- ``nDCG_csfcube@k``: ranks 1 and 2 weigh 1, rank r >= 2 weighs 1/log2(r); the ideal DCG comes
  from the grades of the documents the run ranked (unjudged = 0), all of them, not only the top
  k. A custom ir_measures measure (`ir_measures.define`); no library implements it.
- ``nDCG_csfcube%p``: the same NDCG cut at ``int(p / 100 * n)`` for a run that ranks n
  documents for the query (the release's ``ndcg%20`` is p = 20); 0 when the cut is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import ir_measures

from evalkit.evaluation.measures.base import NEEDS, MeasureSpec, whole_list_measure

CSFCUBE_NDCG = "nDCG_csfcube"


@cache
def _csfcube_weights(k: int) -> tuple[float, ...]:
    """Rank weights of the official script: 1 for ranks 1 and 2, 1/log2(r) from rank 2 on."""
    return tuple(1.0 if r == 1 else 1.0 / math.log2(r) for r in range(1, k + 1))


def ndcg_csfcube(ranked_grades: Sequence[float], k: int) -> float:
    """NDCG@k as the official CSFCube script: the ideal order from the same ranked grades."""
    weights = _csfcube_weights(k)
    ideal = sum(g * w for g, w in zip(sorted(ranked_grades, reverse=True), weights))
    return sum(g * w for g, w in zip(ranked_grades, weights)) / ideal if ideal > 0 else 0.0


@cache
def csfcube_measure(k: int) -> ir_measures.Measure:
    """``nDCG_csfcube@k`` as an ir_measures custom measure."""
    return whole_list_measure(f"{CSFCUBE_NDCG}@{k}", lambda grades: ndcg_csfcube(grades, k))


def percent_cut(n: int, percent: int) -> int:
    """The release's ``int(0.20 * len(ranked list))`` for p = 20: the cut of ``nDCG_csfcube%p``."""
    return int(percent / 100 * n)


def ndcg_csfcube_percent(ranked_grades: Sequence[float], percent: int) -> float:
    """``nDCG_csfcube%p``: the official NDCG cut at p percent of the ranked list; 0 for a cut of 0."""
    k = percent_cut(len(ranked_grades), percent)
    return ndcg_csfcube(ranked_grades, k) if k > 0 else 0.0


@cache
def csfcube_percent_measure(percent: int) -> ir_measures.Measure:
    """``nDCG_csfcube%p`` as an ir_measures custom measure."""
    return whole_list_measure(f"{CSFCUBE_NDCG}%{percent}", lambda grades: ndcg_csfcube_percent(grades, percent))


NDCG_CSFCUBE = MeasureSpec(CSFCUBE_NDCG, f"{CSFCUBE_NDCG}@k", cutoff=NEEDS,
                           build=lambda k, _level: csfcube_measure(k))
NDCG_CSFCUBE_PERCENT = MeasureSpec(CSFCUBE_NDCG, f"{CSFCUBE_NDCG}%p", cutoff=NEEDS, separator="%", max_cutoff=100,
                                   build=lambda percent, _level: csfcube_percent_measure(percent))
