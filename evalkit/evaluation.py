"""Evaluate a run on CSFCube: per-query values, then official or plain aggregation."""

from __future__ import annotations

import math
from itertools import repeat

import pandas as pd

from evalkit.csfcube import FACETS, CSFCube
from evalkit.errors import KitError
from evalkit.metrics import DISCOUNTS, ndcg_csfcube, p_mrr_from_ranks, trec_metrics
from evalkit.protocols import check_protocol
from evalkit.runs import Run, ranked

AGGREGATIONS = ("folds", "mean")


def check_run(run: Run, data: CSFCube, protocol: str, source: str = "run") -> None:
    """Reject queries CSFCube does not have and, in the pool protocol, candidates outside the pool."""
    check_protocol(protocol)
    if not run:
        raise KitError(f"{source}: the run ranks no queries; check the file and --name")
    for qid, scores in run.items():
        query = data.queries.get(qid)
        if query is None:
            raise KitError(f"{source}: unknown seed/facet {qid}; CSFCube has no such query")
        if protocol == "pool":
            outside = sorted(set(scores) - set(query.grades))
            if outside:
                raise KitError(
                    f"{source}: candidate {outside[0]} for {qid} is outside the judged pool; "
                    "rank only pool candidates or use --protocol pooled"
                )


def per_query(data: CSFCube, run: Run, k: int = 20, discount: str = "csfcube") -> pd.DataFrame:
    """One row per query of the run: seed, facet, test fold, ndcg@k, map, mrr, p@k, r@k, p-mrr."""
    if discount not in DISCOUNTS:
        raise KitError(f"unknown discount {discount!r}; choose one of {', '.join(DISCOUNTS)}")
    orders = {qid: ranked(scores) for qid, scores in run.items()}
    library = trec_metrics(data.qrels(), run, k, orders, with_ndcg=discount == "trec")
    rank_maps = {qid: dict(zip(order, range(1, len(order) + 1))) for qid, order in orders.items()}
    rows = []
    for qid in sorted(run):
        query = data.queries[qid]
        row = {"qid": qid, "seed": query.seed, "facet": query.facet, "fold": data.fold_of(qid)}
        row.update(library[qid])
        if discount == "csfcube":
            grades = list(map(query.grades.get, orders[qid], repeat(0)))  # unjudged -> 0
            row[f"ndcg@{k}"] = ndcg_csfcube(grades, k)
        row["p-mrr"] = _p_mrr_of(data, rank_maps, qid)
        rows.append(row)
    columns = ["qid", "seed", "facet", "fold", f"ndcg@{k}", "map", "mrr", f"p@{k}", f"r@{k}", "p-mrr"]
    return pd.DataFrame(rows, columns=columns).set_index("qid")


def _p_mrr_of(data: CSFCube, rank_maps: dict[str, dict[str, int]], qid: str) -> float:
    """p-MRR of a query against the run of the same seed under its other annotated facet."""
    query = data.queries[qid]
    facets = data.paired_seeds.get(query.seed)
    if not facets:
        return math.nan
    other = data.queries[f"{query.seed}_{next(f for f in facets if f != query.facet)}"]
    if other.qid not in rank_maps:
        return math.nan
    changed = query.relevant - other.relevant
    return p_mrr_from_ranks(changed, rank_maps[qid], rank_maps[other.qid])


def fold_mean(values: pd.Series, fold: pd.Series) -> float:
    """The official aggregate: mean over test folds of the mean over each fold's queries."""
    means = values.groupby(fold).mean().dropna()
    return float(means.mean()) if len(means) else math.nan


def summarize(table: pd.DataFrame, aggregate: str = "folds") -> dict[str, dict[str, float]]:
    """{metric: {facet..., "all": value}} as fractions.

    Ranking metrics: per facet and over all queries, the fold mean (``folds``, the
    official aggregate) or the plain mean (``mean``). p-MRR: the plain mean per
    facet over the paired queries; ``all`` is the mean of the facet means.
    """
    if aggregate not in AGGREGATIONS:
        raise KitError(f"unknown aggregation {aggregate!r}; choose one of {', '.join(AGGREGATIONS)}")

    def agg(rows: pd.DataFrame, column: str) -> float:
        if aggregate == "folds":
            return fold_mean(rows[column], rows["fold"])
        return float(rows[column].mean()) if len(rows) else math.nan

    summary = {}
    for column in [c for c in table.columns if c not in ("seed", "facet", "fold", "p-mrr")]:
        summary[column] = {f: agg(table[table.facet == f], column) for f in FACETS}
        summary[column]["all"] = agg(table, column)
    pmrr = {f: float(table.loc[table.facet == f, "p-mrr"].mean()) for f in FACETS}
    present = [v for v in pmrr.values() if not math.isnan(v)]
    pmrr["all"] = sum(present) / len(present) if present else math.nan
    summary["p-mrr"] = pmrr
    return summary
