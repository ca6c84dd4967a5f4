"""Evaluate a run on any collection: per-query values, then the collection's aggregation.

The evaluator reads each measure's declaration (`evalkit.evaluation.measures`: a `MeasureSpec`
per family), never its name. `per_query` gives one row per run query: its stratum (CSFCube's
facet), its test fold, every requested ranking measure against the collection's judged qrels (a
query's excluded document, CSFCube's seed, left out: `Collection.judged`; with the collection's
relevance level), then each declared per-query column the collection supports (p-MRR where the
collection pairs instructions). `summarize` aggregates per stratum and overall as each column's
declaration says: ``QUERY_MEAN`` by the fold mean of the test halves when the collection has
folds (CSFCube's official aggregate), else the plain mean; ``STRATUM_MEAN`` (p-MRR) as the mean
of the stratum means (how the paper's Agg column adds up); ``ONE_VALUE`` measures (robustness@k)
are one value `summary_of` reads from their inputs.

Which measures a table shows is chosen here too, for the CLI, the API and the study notebooks
alike: `default_measures` (the table ``evalkit evaluate`` prints: the collection's declared
`Collection.table`, shaped by `DISCOUNTS` and k, else its headline measures), `check_measures` (each name
parsed against the collection before anything is scored), `computed_measures` (what the per-query
table must hold for them), `compared_measures` (those paired tests compare) and `summary_of` (the
summary in the requested order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal

import pandas as pd

from evalkit.core.errors import KitError, RequestError
from evalkit.core.schema import Problem, check_value
from evalkit.data.collection import Collection
from evalkit.data.runs import Run
from evalkit.evaluation import aggregate, measures

PMRR = measures.PMRR  # "p-MRR", declared in `evalkit.evaluation.measures.pmrr`
SCALE = 100  # every printed table shows measures x100 (the README's metric conventions); data stays fractions
AGGREGATIONS = ("folds", "mean")
# The request's aggregation: the fold aggregate (``folds``, CSFCube's official one) or the plain ``mean``.
Aggregation = Annotated[Literal[AGGREGATIONS], Problem(f"choose one of {', '.join(AGGREGATIONS)}")]
# The discounts a collection's default table (`Collection.table`) may give its nDCG: the nDCG
# family each names, the CSFCube release's (``nDCG_csfcube@k``) or trec_eval's (``nDCG@k``).
DISCOUNTS = {"csfcube": measures.CSFCUBE_NDCG, "trec": "nDCG"}


def _spec(name: str) -> measures.MeasureSpec | None:
    """The declaration of a measure name; None where it is not one (the parser then says why)."""
    parsed = measures.find(name)
    return parsed.spec if parsed else None


def _requirement_met(spec: measures.MeasureSpec, collection: Collection) -> bool:
    return spec.requires is None or bool(getattr(collection, spec.requires))


def ranking_measures(collection: Collection, names: Sequence[str] | None = None) -> list[str]:
    """The measures `per_query` computes with `evalkit.evaluation.measures.judged_values`: the ranking
    declarations (a per-query column such as p-MRR, or a one-value measure such as robustness@k, aside)."""
    names = list(names) if names is not None else list(collection.measures)
    return [n for n in names if (spec := _spec(n)) is None or spec.ranking]


def per_query(collection: Collection, run: Run, names: Sequence[str] | None = None,
              pmrr_ties: str = "kit") -> pd.DataFrame:
    """One row per run query: stratum, fold, each measure (default: the collection's), then each
    declared column measure the collection supports that is asked for or always computed (p-MRR:
    every paired collection's table, tied scores ordered by `pmrr_ties`: ``kit`` or ``mteb``, see
    `evalkit.evaluation.measures.p_mrr`)."""
    names = list(names) if names is not None else list(collection.measures)
    table = measures.judged_values(collection.judged, run, ranking_measures(collection, names),
                               collection.relevance_level)
    table.insert(0, "stratum", [collection.strata.get(q, "all") for q in table.index])
    table.insert(1, "fold", [collection.test_fold_of(q) for q in table.index])
    asked = {spec.family for n in names if (spec := _spec(n)) is not None}
    options = {"pmrr_ties": pmrr_ties}
    for spec in measures.declarations():
        if spec.column is not None and (spec.always or spec.family in asked) and _requirement_met(spec, collection):
            table[spec.family] = spec.column(collection, run, options).reindex(table.index)
    return table


def check_aggregate(value: object) -> str:
    """An aggregation under the request's rule (`Aggregation`), for a direct `summarize` call."""
    return check_value("aggregate", Aggregation, value)


def ndcg_family(discount: str) -> str:
    """The nDCG family a default table shows under `discount` (`DISCOUNTS`): ``nDCG_csfcube`` or ``nDCG``."""
    if discount not in DISCOUNTS:
        raise RequestError("discount", f"choose {' or '.join(DISCOUNTS)}", value=discount)
    return DISCOUNTS[discount]


def default_shape(collection: Collection, discount: str | None = None, k: int | None = None) -> dict | None:
    """The discount and k that shape the collection's default table (`Collection.table`), the
    table's own where not given, as the settings line says them; None when it declares none."""
    table = collection.table
    if table is None:
        return None
    return {"discount": discount or table.discount, "k": table.k if k is None else k}


def default_measures(collection: Collection, discount: str | None = None, k: int | None = None) -> list[str]:
    """The collection's default table (`Collection.table`, shaped by `discount` and `k`), then its
    own headline measures not in it; without a declared table, its own measures (then `discount`
    and `k` shape nothing, and are refused)."""
    own = list(collection.measures)
    shape = default_shape(collection, discount, k)
    if shape is None:
        if discount is not None or k is not None:
            raise RequestError("discount" if discount is not None else "k",
                               f"shapes a default table; {collection.name} declares none: name the measures with "
                               f"{{measures}} (its own: {', '.join(own)})")
        return own
    table = collection.table.names(ndcg_family(shape["discount"]), shape["k"])
    return table + [m for m in own if m not in table]


def parsed_measure(name: str, relevance_level: int) -> measures.Parsed:
    """One measure name parsed by its declaration (`evalkit.evaluation.measures.parse`; a ranking
    measure also as ir_measures computes it at `relevance_level`); a name the grammar refuses is
    the request's ``measures`` field's error."""
    try:
        parsed = measures.parse(name)
        if parsed.spec.ranking:
            measures.parse_measure(name, relevance_level)
    except RequestError:
        raise
    except KitError as exc:  # the name's grammar (`evalkit.evaluation.measures`): the request's measures field
        raise RequestError("measures", str(exc)) from None
    return parsed


def check_measures(names: Sequence[str], collection: Collection) -> None:
    """Each measure name parsed against `collection` before anything is scored: its declaration
    (`evalkit.evaluation.measures.parse`) and what the declaration requires of the collection
    (p-MRR instruction pairs, robustness@k query groups)."""
    for name in names:
        spec = parsed_measure(name, collection.relevance_level).spec
        if not _requirement_met(spec, collection):
            raise RequestError("measures", f"{name} needs {spec.requires_help or spec.requires}; {collection.name} "
                               "has none (drop it from {measures})")


def computed_measures(names: Sequence[str]) -> list[str]:
    """Measures for the per-query table: every name with a per-query value, then the inputs of the
    one-value measures (robustness@k: nDCG@k per instance) not already there."""
    out = compared_measures(names)
    for name in names:
        parsed = measures.find(name)
        if parsed is not None and parsed.spec.inputs is not None:
            out += [n for n in parsed.spec.inputs(parsed.cutoff) if n not in out]
    return out


def compared_measures(names: Sequence[str]) -> list[str]:
    """The names with per-query values, which paired tests compare: all but the one-value measures."""
    return [n for n in names if (spec := _spec(n)) is None or spec.aggregate != measures.ONE_VALUE]


def summary_of(collection: Collection, table: pd.DataFrame, names: Sequence[str], aggregate_by: str,
               settings: dict) -> dict:
    """{measure: {stratum..., "all": value}} in the requested order (strata in collection order;
    a one-value measure: {"all": value}), plus "queries" (counted queries per stratum: the
    test-fold queries under the fold aggregate) and "settings"."""
    computed = summarize(collection, table, aggregate_by)
    order = list(dict.fromkeys(collection.strata.values()))
    summary: dict = {}
    for name in names:
        parsed = measures.find(name)
        if parsed is not None and parsed.spec.aggregate == measures.ONE_VALUE:
            summary[name] = {"all": parsed.spec.value(collection, table, parsed.cutoff)}
            continue
        parts = computed.get(name, {})
        summary[name] = {label: parts.get(label, math.nan) for label in [*order, *parts]}
    counted = table
    if aggregate_by == "folds" and collection.folds:
        counted = table[table["fold"].notna()]
    strata = counted["stratum"]
    summary["queries"] = {label: int((strata == label).sum()) for label in order} | {"all": len(counted)}
    summary["settings"] = settings
    return summary


def summarize(collection: Collection, table: pd.DataFrame, aggregate_by: str = "folds") -> dict[str, dict[str, float]]:
    """{measure: {stratum..., "all": value}} as fractions, each column as its declaration
    aggregates (see the module docstring; a column no declaration names: as a ranking measure)."""
    check_aggregate(aggregate_by)
    folds = dict(zip(table.index, table["fold"])) if aggregate_by == "folds" and collection.folds else None
    strata = {q: collection.strata[q] for q in table.index if q in collection.strata}
    by_strata = [c for c in table.columns if isinstance(c, str) and (spec := _spec(c)) is not None
                 and spec.aggregate == measures.STRATUM_MEAN]
    return aggregate.summarize(table, strata, folds, strata_mean=by_strata)


def paired_by_units(collection: Collection, measure: str) -> bool:
    """Whether paired tests pair `measure` by the collection's pair units (its declaration's
    ``units`` is ``PAIR`` and the collection has pairs), not by query."""
    spec = _spec(measure)
    return spec is not None and spec.units == measures.PAIR and bool(collection.pairs)


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
