"""Aggregation of per-query values (fractions) into the figures tables report.

- `plain_mean`: the mean over the queries that have a value (NaN skipped); NaN when none.
- `fold_mean`: the official CSFCube aggregate: per test fold, the mean over its queries
  (NaN skipped), then the mean over the folds that have a value. Queries in no test fold
  (``None`` or absent from the mapping) take no part.
- `summarize`: per stratum (e.g. CSFCube's facets) and over all queries. Each column by
  `fold_mean` when test folds are given, else by `plain_mean`; the columns named in
  `strata_mean` (those whose declaration aggregates by ``STRATUM_MEAN``, p-MRR:
  `evalkit.evaluation.evaluate.summarize` names them): the plain mean per stratum over the
  queries that have a value, and "all" as the mean of the stratum means that exist (how the
  paper's Agg. column adds up); without strata, the plain mean.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping

import pandas as pd

ALL = "all"


def plain_mean(values: Iterable[float] | pd.Series) -> float:
    """Mean of the values that are not NaN; NaN when there are none."""
    series = pd.Series(values, dtype=float) if not isinstance(values, pd.Series) else values.astype(float)
    return float(series.mean()) if series.notna().any() else math.nan


def fold_mean(values: pd.Series, test_fold_of: Mapping[str, str | None]) -> float:
    """Mean over test folds of each fold's mean over its queries (index = qid), NaN-skipping."""
    values = values.astype(float)
    folds = pd.Series([test_fold_of.get(qid) for qid in values.index], index=values.index, dtype=object)
    means = values.groupby(folds, dropna=True).mean().dropna()
    return float(means.mean()) if len(means) else math.nan


def _strata_labels(strata: Mapping[str, str]) -> list[str]:
    """Stratum labels in order of first appearance."""
    return list(dict.fromkeys(strata.values()))


def summarize(
    table: pd.DataFrame,
    strata: Mapping[str, str],
    test_fold_of: Mapping[str, str | None] | None = None,
    strata_mean: Collection[str] = (),
) -> dict[str, dict[str, float]]:
    """``{measure: {stratum..., "all": value}}`` over the numeric columns of a per-query table
    (index = qid); other columns are ignored.

    Every stratum label in `strata` appears (NaN when the table has none of its queries);
    queries of no stratum count only in "all".
    """
    labels = _strata_labels(strata)
    label_of = pd.Series([strata.get(qid) for qid in table.index], index=table.index, dtype=object)
    members = {label: table.index[label_of == label] for label in labels}

    def ranking(column: pd.Series) -> float:
        return fold_mean(column, test_fold_of) if test_fold_of is not None else plain_mean(column)

    summary: dict[str, dict[str, float]] = {}
    for name in table.columns:
        if not pd.api.types.is_numeric_dtype(table[name]) or pd.api.types.is_bool_dtype(table[name]):
            continue
        column = table[name]
        if name in strata_mean:
            parts = {label: plain_mean(column.loc[members[label]]) for label in labels}
            present = [v for v in parts.values() if not math.isnan(v)]
            if labels:
                parts[ALL] = sum(present) / len(present) if present else math.nan
            else:
                parts[ALL] = plain_mean(column)
        else:
            parts = {label: ranking(column.loc[members[label]]) for label in labels}
            parts[ALL] = ranking(column)
        summary[name] = parts
    return summary
