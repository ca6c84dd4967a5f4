"""Per-query ranking metrics (definitions: DESIGN section 3).

- NDCG@k, ``csfcube`` discount: the official CSFCube script. Ranks 1 and 2 weigh 1,
  rank r >= 2 weighs 1/log2(r); the ideal DCG comes from the grades of the
  candidates the run ranked. Computed here (no library implements it).
- NDCG@k, ``trec`` discount: trec_eval's ``ndcg_cut``, computed by pytrec_eval (the
  trec_eval library). Gain = grade, discount 1/log2(rank+1), ideal DCG from every
  judged candidate.
- AP, RR, P@k, R@k: trec_eval conventions (grade >= 2 relevant; AP and R@k divide by
  every relevant judged document; P@k divides by k), computed here on the kit's
  ranking; tests check them against pytrec_eval.
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


def binary_metrics(order: Sequence[str], grades: Mapping[str, int], k: int) -> dict[str, float]:
    """AP, RR, P@k and R@k of one ranking (best first) under trec_eval's conventions."""
    relevant = {doc for doc, grade in grades.items() if grade >= RELEVANT_GRADE}
    positions = [rank for rank, doc in enumerate(order, start=1) if doc in relevant]
    total = len(relevant)
    in_top_k = sum(1 for rank in positions if rank <= k)
    return {
        "map": sum(hit / rank for hit, rank in enumerate(positions, start=1)) / total if total else 0.0,
        "mrr": 1.0 / positions[0] if positions else 0.0,
        f"p@{k}": in_top_k / k,
        f"r@{k}": in_top_k / total if total else 0.0,
    }


def trec_ndcg(qrels: Mapping[str, Mapping[str, int]], run: Run, k: int,
              orders: Mapping[str, list[str]] | None = None) -> dict[str, float]:
    """NDCG@k with the trec discount per query, computed by pytrec_eval on the kit's ranking."""
    evaluator = pytrec_eval.RelevanceEvaluator({qid: qrels[qid] for qid in run}, {f"ndcg_cut.{k}"})
    return {qid: float(result[f"ndcg_cut_{k}"]) for qid, result in evaluator.evaluate(rank_scores(run, orders)).items()}


def trec_metrics(qrels: Mapping[str, Mapping[str, int]], run: Run, k: int,
                 orders: Mapping[str, list[str]] | None = None,
                 with_ndcg: bool = True) -> dict[str, dict[str, float]]:
    """Per query: ndcg@k (trec discount; unless `with_ndcg` is False), map, mrr, p@k, r@k."""
    if k < 1:
        raise KitError(f"cut-off k={k} must be a positive integer")
    values = {qid: binary_metrics(orders[qid] if orders is not None else ranked(scores), qrels[qid], k)
              for qid, scores in run.items()}
    if with_ndcg:
        for qid, value in trec_ndcg(qrels, run, k, orders).items():
            values[qid][f"ndcg@{k}"] = value
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
