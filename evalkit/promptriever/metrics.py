"""The metrics FollowIR and Promptriever report, per dataset (`DATASET_METRICS`).

- ``map@1000``, ``ndcg@5``, ``ndcg@10``, ``mrr@10``: trec_eval conventions computed by
  ir_measures on the kit's ranks (`evalkit.metrics.rank_scores`); graded gains for nDCG,
  grade >= 1 relevant for AP and RR. On FollowIR they score the original instructions
  against the original qrels, as the FollowIR tables do.
- ``p-mrr``: `evalkit.metrics.p_mrr` (the CSFCube one) per FollowIR pair, i = the original
  instruction, i' = the changed one, over the documents with grade >= 1 under the original
  qrels and < 1 under the changed qrels; mean over the pairs that have such documents.
- ``robustness@10`` (InstructIR): nDCG@10 per instance, the minimum over the instances of
  one query (its users' instructions), averaged over queries: the official script's
  per-group minimum, macro-averaged.

Values are fractions; published tables print them x100.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import ir_measures
import pandas as pd

from evalkit.errors import KitError
from evalkit.metrics import p_mrr, rank_scores
from evalkit.promptriever.io import Qrels
from evalkit.runs import Run

RELEVANT = 1  # binary relevance threshold for AP, RR and p-MRR (trec_eval's default)
MEASURES = {
    "map@1000": ir_measures.AP(rel=RELEVANT) @ 1000,
    "ndcg@5": ir_measures.nDCG @ 5,
    "ndcg@10": ir_measures.nDCG @ 10,
    "mrr@10": ir_measures.RR(rel=RELEVANT) @ 10,
}
ROBUSTNESS = {"robustness@10": "ndcg@10"}  # robustness metric -> the per-instance measure it minimises
DATASET_METRICS = {
    "robust04": ("map@1000", "p-mrr"),
    "core17": ("map@1000", "p-mrr"),
    "news21": ("ndcg@5", "p-mrr"),
    "instructir": ("ndcg@10", "robustness@10"),
    "msmarco-dev": ("mrr@10",),
    "dl19": ("ndcg@10",),
    "dl20": ("ndcg@10",),
    "beir": ("ndcg@10",),
}


def per_query(qrels: Qrels, run: Run, names: Iterable[str]) -> pd.DataFrame:
    """One row per run query, one column per measure name in `MEASURES` (NaN where unjudged)."""
    names = list(names)
    unknown = [n for n in names if n not in MEASURES]
    if unknown:
        raise KitError(f"unknown measure {unknown[0]!r}; choose from {', '.join(MEASURES)}")
    by_measure = {MEASURES[n]: n for n in names}
    table = pd.DataFrame(index=pd.Index(sorted(run), name="qid"), columns=names, dtype=float)
    judged = {qid: dict(qrels[qid]) for qid in run if qrels.get(qid)}  # the library scores every qrels query
    for metric in ir_measures.iter_calc(list(by_measure), judged, rank_scores(run)):
        table.loc[metric.query_id, by_measure[metric.measure]] = float(metric.value)
    return table


def changed_documents(og: Mapping[str, int], changed: Mapping[str, int]) -> set[str]:
    """Documents relevant under the original instruction but not under the changed one."""
    return {doc for doc, grade in og.items() if grade >= RELEVANT and changed.get(doc, 0) < RELEVANT}


def followir_p_mrr(qrels: Qrels, run: Run, pairs: Mapping[str, str]) -> pd.Series:
    """p-MRR per original instance id, pairing by `pairs` (original id -> changed id)."""
    values = {}
    for og, changed in pairs.items():
        for qid in (og, changed):
            if qid not in run:
                raise KitError(f"run lacks query {qid}; rank the candidates under both instructions")
        docs = changed_documents(qrels.get(og, {}), qrels.get(changed, {}))
        values[og] = p_mrr(docs, run[og], run[changed])
    return pd.Series(values, dtype=float, name="p-mrr")


def robustness(values: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> float:
    """Mean over groups of the minimum per-instance value; every instance needs a value."""
    minima = []
    for group, qids in groups.items():
        scores = [values.get(q, math.nan) for q in qids]
        missing = [q for q, s in zip(qids, scores) if math.isnan(s)]
        if missing:
            raise KitError(f"no value for instance {missing[0]} of query {group!r}; evaluate every instance")
        minima.append(min(scores))
    return sum(minima) / len(minima) if minima else math.nan


def score(
    dataset: str,
    qrels: Qrels,
    run: Run,
    pairs: Mapping[str, str] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, float]:
    """The metrics `DATASET_METRICS` lists for `dataset`, as means (fractions).

    FollowIR needs `pairs` (`FollowIR.pairs`); InstructIR needs `groups` (`InstructIR.groups`).
    """
    if dataset not in DATASET_METRICS:
        raise KitError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASET_METRICS)}")
    wanted = DATASET_METRICS[dataset]
    if "p-mrr" in wanted and pairs is None:
        raise KitError(f"{dataset} needs pairs (original -> changed query ids), e.g. FollowIR.pairs")
    if any(m in ROBUSTNESS for m in wanted) and groups is None:
        raise KitError(f"{dataset} needs groups (query -> instance ids), e.g. InstructIR.groups")
    scored = {q: run[q] for q in pairs if q in run} if pairs is not None else run
    names = sorted({ROBUSTNESS.get(m, m) for m in wanted if m != "p-mrr"})
    table = per_query(qrels, scored, names)
    out = {}
    for metric in wanted:
        if metric == "p-mrr":
            out[metric] = float(followir_p_mrr(qrels, run, pairs).mean())
        elif metric in ROBUSTNESS:
            out[metric] = robustness(table[ROBUSTNESS[metric]].to_dict(), groups)
        else:
            out[metric] = float(table[metric].mean())
    return out
