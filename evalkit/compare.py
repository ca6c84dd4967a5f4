"""Paired comparison of runs: each run's aggregate beside the first run's, with a paired
two-sided t-test over per-query values and Holm's adjustment, per stratum and overall.

`compare` takes per-query tables (`evalkit.evaluation.per_query`) of several runs on one
collection. The first run is the reference. For every measure, stratum (CSFCube's facets)
and ``all``: each run's aggregate (`evalkit.evaluation.summarize`: the fold mean of the test
halves where the collection has folds, p-MRR the mean of the stratum means), its difference
from the reference, and the t-test (`evalkit.stats.paired_ttest`) over the queries of that
stratum both runs have a value for (``n``); ``p_holm`` adjusts the p-values of the other runs
for each measure and stratum together (`evalkit.stats.holm`). With fewer than two paired
queries there is no test (NaN). Used by ``evalkit evaluate --runs A --runs B ...`` and
`evalkit.api`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from evalkit.aggregate import ALL
from evalkit.collection import Collection
from evalkit.evaluation import summarize
from evalkit.stats import holm, paired_ttest

COLUMNS = ["measure", "stratum", "run", "value", "delta", "t", "p", "p_holm", "n"]


def compare(collection: Collection, tables: Mapping[str, pd.DataFrame], measures: Sequence[str],
            aggregate_by: str = "folds") -> pd.DataFrame:
    """One row per measure, stratum and run (see the module docstring); the first run is the reference."""
    names = list(tables)
    summaries = {name: summarize(collection, table, aggregate_by) for name, table in tables.items()}
    strata = list(dict.fromkeys(collection.strata.values()))
    reference = tables[names[0]]
    rows = []
    for measure in measures:
        for stratum in [*strata, ALL]:
            tests = {name: _test(reference, tables[name], measure, stratum) for name in names[1:]}
            adjusted = holm({n: t[1] for n, t in tests.items() if not math.isnan(t[1])})
            base = summaries[names[0]].get(measure, {}).get(stratum, math.nan)
            for name in names:
                value = summaries[name].get(measure, {}).get(stratum, math.nan)
                t, p, n = tests.get(name, (math.nan, math.nan, len(_values(reference, measure, stratum))))
                rows.append({"measure": measure, "stratum": stratum, "run": name, "value": value,
                             "delta": math.nan if name == names[0] else value - base, "t": t, "p": p,
                             "p_holm": adjusted.get(name, math.nan), "n": n})
    return pd.DataFrame(rows, columns=COLUMNS)


def _values(table: pd.DataFrame, measure: str, stratum: str) -> pd.Series:
    if measure not in table:
        return pd.Series(dtype=float)
    rows = table if stratum == ALL else table[table["stratum"] == stratum]
    return rows[measure].dropna()


def _test(reference: pd.DataFrame, other: pd.DataFrame, measure: str, stratum: str) -> tuple[float, float, int]:
    """(t, p, n) of the paired t-test over the stratum's queries both tables have a value for."""
    a, b = _values(other, measure, stratum), _values(reference, measure, stratum)
    n = len(a.index.intersection(b.index))
    if n < 2:
        return math.nan, math.nan, n
    result = paired_ttest(a, b)
    return result.statistic, result.pvalue, result.n
