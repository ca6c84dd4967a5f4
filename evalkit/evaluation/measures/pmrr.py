"""``p-MRR`` (FollowIR, as mteb): how far a ranking follows a change of instruction.

For a pair i -> i', over the documents relevant under i (grade >= level) and not relevant under
i' (the changed documents), with R_i, R_i' the 1-based ranks (the kit's tie rule) in the runs of
i and i': ``R_i'/R_i - 1`` if R_i > R_i' else ``1 - R_i/R_i'``; a document missing from a run
ranks right after that run's last document; mean over the changed documents, NaN when there are
none. A run that lacks i or i' is an error (KitError) for `p_mrr`: restrict the pairs explicitly
if that is intended (the declaration's column does: a run is scored on the pairs it covers).
Equal to mteb's ``calculate_pmrr`` on runs without ties (tests pin mteb's values); on ties mteb
>= 2.19.5 ranks by doc id descending (older mteb: by dict insertion order), which
``ties="mteb"`` reproduces.

Declared as a per-query column of every collection with instruction pairs (indexed by i),
aggregated per stratum and, over all queries, as the mean of the stratum means (how the paper's
Agg column adds up); statistical tests pair it by pair unit (a seed's two facets are one unit).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import ranks
from evalkit.evaluation.measures.base import FORBIDS, PAIR, STRATUM_MEAN, MeasureSpec, Qrels, RunScores, check_level

PMRR = "p-MRR"
PMRR_TIES = ("kit", "mteb")


def pair_score(rank_i: int, rank_other: int) -> float:
    """p-MRR term of one changed document: ``R_i'/R_i - 1`` if R_i > R_i' (it ranks worse under
    its own instruction: a penalty), else ``1 - R_i/R_i'`` (a reward); 0 for equal ranks."""
    if rank_i > rank_other:
        return rank_other / rank_i - 1.0
    return 1.0 - rank_i / rank_other


def changed_documents(grades_i: Mapping[str, int], grades_other: Mapping[str, int], relevance_level: int) -> set[str]:
    """Documents relevant under i and not relevant under i' (unjudged under i' = not relevant)."""
    return {doc for doc, g in grades_i.items() if g >= relevance_level and grades_other.get(doc, 0) < relevance_level}


def _mean_pair_score(changed: Iterable[str], rank_i: Mapping[str, int], rank_other: Mapping[str, int]) -> float:
    """Mean `pair_score`; a document missing from a run ranks right after its last document."""
    terms = [pair_score(rank_i.get(doc, len(rank_i) + 1), rank_other.get(doc, len(rank_other) + 1))
             for doc in sorted(changed)]
    return sum(terms) / len(terms) if terms else math.nan


def ranks_ids_descending(scores: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks by score descending, then document id descending: mteb's p-MRR order
    (`get_rank_from_dict` in mteb._evaluators.retrieval_metrics since mteb 2.19.5, as trec_eval)."""
    by_id = sorted(scores, reverse=True)
    return {doc: i for i, doc in enumerate(sorted(by_id, key=scores.__getitem__, reverse=True), start=1)}


def p_mrr(qrels: Qrels, run: RunScores, pairs: Mapping[str, str], relevance_level: int,
          ties: str = "kit") -> pd.Series:
    """p-MRR per pair i -> i' (`pairs`), indexed by i (sorted); NaN where no document changed.

    `ties` orders tied scores: ``kit`` (the kit's rule everywhere, document id ascending) or
    ``mteb`` (id descending, as mteb's evaluator; `ranks_ids_descending`). Without ties the
    two are equal. Raises KitError when the run lacks i or i' of a pair: pass only the pairs
    the run covers.
    """
    check_level(relevance_level)
    if ties not in PMRR_TIES:
        raise RequestError("pmrr_ties", f"p-MRR tie order {ties!r} is not one of {', '.join(PMRR_TIES)}; choose one")
    rank_of = ranks if ties == "kit" else ranks_ids_descending
    rank_maps: dict[str, dict[str, int]] = {}
    values = {}
    for qid, other in pairs.items():
        for needed in (qid, other):
            if needed not in run:
                raise DataError("run", f"the run lacks query {needed} of the p-MRR pair {qid} -> {other}; rank the "
                                       "candidates under both instructions, or pass only the pairs the run covers")
            if needed not in rank_maps:
                rank_maps[needed] = rank_of(run[needed])
        changed = changed_documents(qrels.get(qid, {}), qrels.get(other, {}), relevance_level)
        values[qid] = _mean_pair_score(changed, rank_maps[qid], rank_maps[other])
    series = pd.Series(values, dtype=float, name=PMRR).sort_index()
    series.index.name = "qid"
    return series


def pmrr_column(collection: Collection, run: RunScores, options: Mapping[str, Any]) -> pd.Series:
    """p-MRR of the collection's pairs the run covers (both queries ranked), against its judged qrels;
    ``options["pmrr_ties"]`` orders tied scores (`PMRR_TIES`, default ``kit``)."""
    covered = {a: b for a, b in collection.pairs.items() if a in run and b in run}
    return p_mrr(collection.judged, run, covered, collection.relevance_level, options.get("pmrr_ties", "kit"))


P_MRR = MeasureSpec(PMRR, PMRR, cutoff=FORBIDS, cutoff_note="it reads every changed document of a pair",
                    binary=True, column=pmrr_column, always=True, requires="pairs",
                    requires_help="instruction pairs", aggregate=STRATUM_MEAN, units=PAIR)
