"""Evaluate a run on any collection: per-query values, then the collection's aggregation.

`per_query` gives one row per run query: its stratum (CSFCube's facet), its test fold,
every requested measure against the collection's judged qrels (a query's excluded document,
CSFCube's seed, left out: `Collection.judged`) (`evalkit.measures`, with the collection's relevance level) and
p-MRR where the collection pairs instructions. `summarize` aggregates per stratum and
overall: ranking measures by the fold mean of the test halves when the collection has
folds (CSFCube's official aggregate), else the plain mean; p-MRR as the mean of the
stratum means (how the paper's Agg column adds up).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from evalkit import aggregate, measures
from evalkit.collection import Collection
from evalkit.errors import KitError
from evalkit.runs import Run

PMRR = "p-MRR"
SCALE = 100  # every printed table shows measures x100 (the README's metric conventions); data stays fractions
RELEASED = "released"  # the protocol that ranks and judges a collection as released, nothing excluded
ROBUSTNESS = "robustness@"
AGGREGATIONS = ("folds", "mean")


def protocol_collection(collection: Collection, protocol: str) -> Collection:
    """The collection as a protocol ranks and judges it: ``released`` excludes nothing
    (`Collection.including_excluded`), every other protocol excludes what the collection does."""
    return collection.including_excluded() if protocol == RELEASED else collection


def check_run(run: Run, collection: Collection, source: str = "run", within_candidates: bool = True) -> None:
    """Reject an empty run, queries the collection lacks and, with `within_candidates`,
    documents outside a query's given candidate list (its excluded document included)."""
    if not run:
        raise KitError(f"{source}: the run ranks no queries; check the file and --name")
    for qid, scores in run.items():
        if qid not in collection.queries:
            raise KitError(f"{source}: unknown query {qid}; {collection.name} has no such query")
        if within_candidates and collection.candidates is not None:
            allowed = set(collection.candidates.get(qid, ())) - {collection.exclude.get(qid)}
            outside = sorted(set(scores) - allowed)
            if outside == [collection.exclude.get(qid)]:
                raise KitError(f"{source}: {qid} ranks its excluded document {outside[0]} (its seed); drop it, or "
                               f"use --protocol {RELEASED} to evaluate the pools as released")
            if outside:
                raise KitError(f"{source}: document {outside[0]} for {qid} is outside the query's candidate list; "
                               "rank only the given candidates or use --protocol pooled")


def ranking_measures(collection: Collection, names: Sequence[str] | None = None) -> list[str]:
    """The measures `per_query` computes with `evalkit.measures` (p-MRR and robustness aside)."""
    names = list(names) if names is not None else list(collection.measures)
    return [n for n in names if n != PMRR and not n.startswith(ROBUSTNESS)]


def per_query(collection: Collection, run: Run, names: Sequence[str] | None = None,
              pmrr_ties: str = "kit") -> pd.DataFrame:
    """One row per run query: stratum, fold, each measure (default: the collection's), p-MRR
    (tied scores ordered by `pmrr_ties`: ``kit`` or ``mteb``, see `evalkit.measures.p_mrr`)."""
    table = measures.per_query(collection.judged, run, ranking_measures(collection, names),
                               collection.relevance_level)
    table.insert(0, "stratum", [collection.strata.get(q, "all") for q in table.index])
    table.insert(1, "fold", [collection.test_fold_of(q) for q in table.index])
    if collection.pairs:
        covered = {a: b for a, b in collection.pairs.items() if a in run and b in run}
        table[PMRR] = measures.p_mrr(collection.judged, run, covered, collection.relevance_level,
                                       pmrr_ties).reindex(table.index)
    return table


def summarize(collection: Collection, table: pd.DataFrame, aggregate_by: str = "folds") -> dict[str, dict[str, float]]:
    """{measure: {stratum..., "all": value}} as fractions (see the module docstring)."""
    if aggregate_by not in AGGREGATIONS:
        raise KitError(f"unknown aggregation {aggregate_by!r}; choose one of {', '.join(AGGREGATIONS)}")
    folds = dict(zip(table.index, table["fold"])) if aggregate_by == "folds" and collection.folds else None
    strata = {q: collection.strata[q] for q in table.index if q in collection.strata}
    return aggregate.summarize(table, strata, folds, pmrr_column=PMRR)


def robustness_of(collection: Collection, table: pd.DataFrame, measure: str) -> float:
    """InstructIR's robustness: the mean over query groups of the minimum per-instance `measure`."""
    return measures.robustness(table[measure].to_dict(), collection.groups)


def fold_notes(collection: Collection, table: pd.DataFrame, aggregate_by: str = "folds") -> list[str]:
    """Where the fold aggregate (the mean of the test folds' means) is undefined on the queries of
    `table`: a stratum (or all queries) without a test query of some fold, whose value is then
    the other folds' mean only. One line each; none when every fold is covered."""
    if aggregate_by != "folds" or not collection.folds:
        return []
    strata = list(dict.fromkeys(collection.strata.values()))
    notes = []
    for label in [*strata, aggregate.ALL]:
        rows = table if label == aggregate.ALL else table[table["stratum"] == label]
        present = set(rows["fold"].dropna())
        missing = [name for name in collection.folds if name not in present]
        if not missing:
            continue
        if rows.empty:
            notes.append(f"{label}: no query of it was evaluated (shown as -)")
        elif not present:
            notes.append(f"{label}: no evaluated query is in a test fold, so its fold aggregate is undefined "
                         "(shown as -)")
        else:
            notes.append(f"{label}: no evaluated query is in the test half of {', '.join(missing)}, so the fold "
                         f"aggregate is undefined; the value is the mean over {', '.join(sorted(present))} only "
                         "(--aggregate mean for the plain mean)")
    return notes


# Measures that are one number under two names on some runs: (shown, dropped when equal to it).
# AP (trec_eval's, judged documents the run omits count as missed) and the release's MAP_csfcube
# (over the run's ranked list only) agree whenever a run ranks every judged candidate (the pool
# protocols' kit runs); they differ on pooled and full runs (README, metric conventions).
SAME_WHEN_EQUAL = (("AP", "MAP_csfcube"),)


def shown_once(names: Sequence[str], tables) -> tuple[list[str], dict[str, str]]:
    """The default table's measures with a `SAME_WHEN_EQUAL` twin dropped where its per-query
    values equal the other's on every run (`tables`: per-query tables), and {twin: shown as}
    (the settings line and JSON say it: ``same_as=MAP_csfcube:AP``)."""
    names, merged = list(names), {}
    for kept, twin in SAME_WHEN_EQUAL:
        if kept in names and twin in names and all(
                table[kept].fillna(-1.0).equals(table[twin].fillna(-1.0)) for table in tables):
            names.remove(twin)
            merged[twin] = kept
    return names, merged
