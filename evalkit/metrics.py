"""Per-query ranking metrics (definitions: DESIGN section 3).

- NDCG@k, ``csfcube`` discount: the official CSFCube script. Ranks 1 and 2 weigh 1,
  rank r >= 2 weighs 1/log2(r); the ideal DCG comes from the grades of the
  candidates the run ranked. Computed here (no library implements it).
- NDCG@k, ``trec`` discount, AP, RR, P@k, R@k: trec_eval conventions, computed by
  pytrec_eval (the trec_eval library). Gain = grade, discount 1/log2(rank+1), ideal DCG from
  every judged candidate; binary measures count grade >= 2 as relevant.
- p-MRR (FollowIR / mteb): see `pair_score` and `p_mrr`.

Runs are turned into ranks with the kit's tie rule before any library sees them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from functools import cache

import pytrec_eval

from evalkit.csfcube import RELEVANT_GRADE
from evalkit.errors import KitError
from evalkit.runs import Run, has_ties, ranked, ranks

DISCOUNTS = ("csfcube", "trec")


@cache
def _csfcube_weights(k: int) -> tuple[float, ...]:
    """Rank weights of the official script: 1 for ranks 1 and 2, 1/log2(r) from rank 2 on."""
    return tuple(1.0 if r == 1 else 1.0 / math.log2(r) for r in range(1, k + 1))


def ndcg_csfcube(ranked_grades: Sequence[float], k: int) -> float:
    """NDCG@k as the official CSFCube script: ideal order from the same ranked grades."""
    weights = _csfcube_weights(k)
    ideal = sum(map(operator.mul, sorted(ranked_grades, reverse=True)[:k], weights))
    return sum(map(operator.mul, ranked_grades[:k], weights)) / ideal if ideal > 0 else 0.0


def trec_measures(k: int) -> dict[str, tuple[int, str, str]]:
    """Column name -> (relevance level, pytrec_eval measure, its result key) for trec-convention metrics."""
    return {
        f"ndcg@{k}": (1, f"ndcg_cut.{k}", f"ndcg_cut_{k}"),  # graded gains; the level is unused
        "map": (RELEVANT_GRADE, "map", "map"),
        "mrr": (RELEVANT_GRADE, "recip_rank", "recip_rank"),
        f"p@{k}": (RELEVANT_GRADE, f"P.{k}", f"P_{k}"),
        f"r@{k}": (RELEVANT_GRADE, f"recall.{k}", f"recall_{k}"),
    }


def rank_scores(run: Run, orders: Mapping[str, list[str]] | None = None) -> Run:
    """Scores that encode the kit's ranking for libraries: a query's own scores when none
    are tied, else strictly decreasing scores (n, n-1, ...) along the kit's order.

    `orders` may hold each query's already ranked documents, to avoid sorting again.
    """
    out = {}
    for qid, scores in run.items():
        if not has_ties(scores):
            out[qid] = scores
            continue
        order = orders[qid] if orders is not None else ranked(scores)
        out[qid] = dict(zip(order, map(float, range(len(order), 0, -1))))
    return out


def trec_metrics(qrels: Mapping[str, Mapping[str, int]], run: Run, k: int,
                 orders: Mapping[str, list[str]] | None = None,
                 skip: Iterable[str] = ()) -> dict[str, dict[str, float]]:
    """Per query, per column name (`trec_measures`, less `skip`): values computed by pytrec_eval."""
    if k < 1:
        raise KitError(f"cut-off k={k} must be a positive integer")
    judged = {qid: qrels[qid] for qid in run}
    library_run = rank_scores(run, orders)
    values: dict[str, dict[str, float]] = {qid: {} for qid in run}
    by_level: dict[int, dict[str, tuple[str, str]]] = {}
    for name, (level, measure, key) in trec_measures(k).items():
        if name not in skip:
            by_level.setdefault(level, {})[name] = (measure, key)
    for level, measures in by_level.items():
        evaluator = pytrec_eval.RelevanceEvaluator(judged, {m for m, _ in measures.values()}, relevance_level=level)
        for qid, result in evaluator.evaluate(library_run).items():
            values[qid].update({name: float(result[key]) for name, (_, key) in measures.items()})
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
    return p_mrr_from_ranks(changed, ranks(scores_i), ranks(scores_other))


def p_mrr_from_ranks(changed: Iterable[str], rank_i: Mapping[str, int], rank_other: Mapping[str, int]) -> float:
    """`p_mrr` on ranks already computed with the tie rule (1-based, missing documents absent)."""
    terms = [
        pair_score(rank_i.get(doc, len(rank_i) + 1), rank_other.get(doc, len(rank_other) + 1))
        for doc in sorted(changed)
    ]
    return sum(terms) / len(terms) if terms else math.nan
