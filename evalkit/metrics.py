"""Per-query ranking metrics (definitions: DESIGN section 3).

- NDCG@k, ``csfcube`` discount: the official CSFCube script. Ranks 1 and 2 weigh 1,
  rank r >= 2 weighs 1/log2(r); the ideal DCG comes from the grades of the
  candidates the run ranked. Computed here (no library implements it).
- NDCG@k, ``trec`` discount, AP, RR, P@k, R@k: trec_eval conventions, computed by
  ir_measures (pytrec_eval). Gain = grade, discount 1/log2(rank+1), ideal DCG from
  every judged candidate; binary measures count grade >= 2 as relevant.
- p-MRR (FollowIR / mteb): see `pair_score` and `p_mrr`.

Runs are turned into ranks with the kit's tie rule before any library sees them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import ir_measures

from evalkit.csfcube import RELEVANT_GRADE
from evalkit.errors import KitError
from evalkit.runs import Run, ranked, ranks

DISCOUNTS = ("csfcube", "trec")


def ndcg_csfcube(ranked_grades: Sequence[float], k: int) -> float:
    """NDCG@k as the official CSFCube script: ideal order from the same ranked grades."""

    def dcg(grades: Sequence[float]) -> float:
        return sum(g / (1.0 if r == 1 else math.log2(r)) for r, g in enumerate(grades[:k], start=1))

    ideal = dcg(sorted(ranked_grades, reverse=True))
    return dcg(ranked_grades) / ideal if ideal > 0 else 0.0


def trec_measures(k: int) -> dict[str, ir_measures.Measure]:
    """Column name -> ir_measures measure for the trec-convention metrics."""
    return {
        f"ndcg@{k}": ir_measures.nDCG @ k,
        "map": ir_measures.AP(rel=RELEVANT_GRADE),
        "mrr": ir_measures.RR(rel=RELEVANT_GRADE),
        f"p@{k}": ir_measures.P(rel=RELEVANT_GRADE) @ k,
        f"r@{k}": ir_measures.R(rel=RELEVANT_GRADE) @ k,
    }


def rank_scores(run: Run) -> Run:
    """Strictly decreasing scores (n, n-1, ...) that encode the kit's ranking for libraries."""
    out = {}
    for qid, scores in run.items():
        order = ranked(scores)
        out[qid] = {doc: float(len(order) - i) for i, doc in enumerate(order)}
    return out


def trec_metrics(qrels: Mapping[str, Mapping[str, int]], run: Run, k: int) -> dict[str, dict[str, float]]:
    """Per query, per column name (`trec_measures`): values computed by ir_measures."""
    if k < 1:
        raise KitError(f"cut-off k={k} must be a positive integer")
    names = {measure: name for name, measure in trec_measures(k).items()}
    judged = {qid: dict(qrels[qid]) for qid in run}
    values: dict[str, dict[str, float]] = {qid: {} for qid in run}
    for metric in ir_measures.iter_calc(list(names), judged, rank_scores(run)):
        values[metric.query_id][names[metric.measure]] = float(metric.value)
    return values


def pair_score(rank_i: int, rank_other: int) -> float:
    """p-MRR term of one document relevant under instruction i but not under i'.

    ``R_i'/R_i - 1`` if the document ranks worse under i than under i' (a penalty),
    else ``1 - R_i/R_i'`` (a reward); 0 when the ranks are equal.
    """
    if rank_i > rank_other:
        return rank_other / rank_i - 1.0
    return 1.0 - rank_i / rank_other


def p_mrr(
    changed: Iterable[str], scores_i: Mapping[str, float], scores_other: Mapping[str, float]
) -> float:
    """Mean `pair_score` over the changed documents; NaN when there are none.

    A document missing from a run ranks right after that run's last document.
    """
    rank_i, rank_other = ranks(scores_i), ranks(scores_other)
    terms = [
        pair_score(rank_i.get(doc, len(rank_i) + 1), rank_other.get(doc, len(rank_other) + 1))
        for doc in sorted(changed)
    ]
    return sum(terms) / len(terms) if terms else math.nan
