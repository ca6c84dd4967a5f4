"""Paired comparison of runs: each run's aggregate beside the first run's, with a paired test of
the per-query differences and Holm's adjustment, per stratum and overall.

`compare` takes per-query tables (`evalkit.evaluation.evaluate.per_query`) of several runs on one
collection. The first run is the reference. For every measure, stratum (CSFCube's facets)
and ``all``, one row per run:

- ``aggregate``: the run's value as the measures table prints it (`evalkit.evaluation.evaluate.summarize`:
  the mean of the two test-fold means where the collection has folds, p-MRR the mean of the
  stratum means). It is the fold aggregate, not what is tested: the two can differ in sign;
- ``delta``: the mean over the paired units of (run - reference), the quantity ``t`` and ``p``
  test (`evalkit.evaluation.stats.paired_test`: same units, same sign). Units are the stratum's queries
  both runs have a value for; for p-MRR a seed's queries are one unit (its facets are one pair
  of instructions scored both ways, not independent queries: `pair_units`);
- ``t``, ``p`` (paired two-sided t-test; or Fisher's randomization test, ``test="fisher"``,
  whose statistic is ``delta`` itself, ``t`` blank), ``p_holm`` (Holm over the other runs for
  that measure and stratum, `evalkit.evaluation.stats.holm`), ``n`` (paired units), ``note`` (why ``p``
  is blank: fewer than `evalkit.evaluation.stats.MIN_PAIRED` units, no variance).

Runs with no query in common are refused. Used by ``evalkit evaluate --runs A --runs B ...``
and `evalkit.api`; `evalkit.evaluation.compare_table` builds the runs x measures table from the same tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.evaluate import paired_by_units, summarize
from evalkit.evaluation.stats import PERMUTATION_SEED, PERMUTATIONS, holm, paired_test

COLUMNS = ["measure", "stratum", "run", "aggregate", "delta", "t", "p", "p_holm", "n", "note"]


def pair_units(collection: Collection) -> dict[str, str]:
    """Query -> its unit for p-MRR: the queries an instruction pair joins (a CSFCube seed's two
    facets, both ways) are one unit, named by their sorted ids."""
    parent: dict[str, str] = {}

    def root(q: str) -> str:
        while parent.get(q, q) != q:
            q = parent[q]
        return q

    for a, b in collection.pairs.items():
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict[str, list[str]] = {}
    for q in {*collection.pairs, *collection.pairs.values()}:
        members.setdefault(root(q), []).append(q)
    return {q: "+".join(sorted(group)) for group in members.values() for q in group}


def units_of(collection: Collection, measure: str) -> dict[str, str] | None:
    """The grouping `paired_test` uses for `measure`: the pair units where its declaration pairs by
    them (p-MRR's), else None (queries)."""
    return pair_units(collection) if paired_by_units(collection, measure) else None


def check_common(tables: Mapping[str, pd.DataFrame]) -> None:
    """One line when a run shares no query with the reference (the first)."""
    names = list(tables)
    reference = tables[names[0]]
    for name in names[1:]:
        if not len(tables[name].index.intersection(reference.index)):
            raise KitError(f"runs {names[0]} and {name} have no query in common, so there is nothing to pair; "
                           "compare runs of the same queries")


def pair_test(collection: Collection, table: pd.DataFrame, reference: pd.DataFrame, measure: str, stratum: str,
              test: str = "t", permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED):
    """`evalkit.evaluation.stats.paired_test` of `table` against `reference` over a stratum's units."""
    return paired_test(_values(table, measure, stratum), _values(reference, measure, stratum), test,
                       units_of(collection, measure), permutations, seed)


def compare(collection: Collection, tables: Mapping[str, pd.DataFrame], measures: Sequence[str],
            aggregate_by: str = "folds", test: str = "t", permutations: int = PERMUTATIONS,
            seed: int = PERMUTATION_SEED) -> pd.DataFrame:
    """One row per measure, stratum and run (see the module docstring); the first run is the reference."""
    check_common(tables)
    names = list(tables)
    summaries = {name: summarize(collection, table, aggregate_by) for name, table in tables.items()}
    strata = list(dict.fromkeys(collection.strata.values()))
    reference = tables[names[0]]
    rows = []
    for measure in measures:
        for stratum in [*strata, ALL]:
            tests = {name: pair_test(collection, tables[name], reference, measure, stratum, test, permutations, seed)
                     for name in names[1:]}
            adjusted = holm({n: r.pvalue for n, r in tests.items()})
            for name in names:
                aggregate = summaries[name].get(measure, {}).get(stratum, math.nan)
                result = tests.get(name)
                rows.append({"measure": measure, "stratum": stratum, "run": name, "aggregate": aggregate,
                             "delta": math.nan if result is None else result.delta,
                             "t": math.nan if result is None or test != "t" else result.statistic,
                             "p": math.nan if result is None else result.pvalue,
                             "p_holm": adjusted.get(name, math.nan),
                             "n": _units(collection, reference, measure, stratum) if result is None else result.n,
                             "note": "reference" if result is None else (result.note or "")})
    return pd.DataFrame(rows, columns=COLUMNS)


def _units(collection: Collection, table: pd.DataFrame, measure: str, stratum: str) -> int:
    """The reference's own units (queries; seeds for p-MRR) of a stratum."""
    values = _values(table, measure, stratum)
    groups = units_of(collection, measure)
    return len(values) if groups is None else len({groups.get(q, q) for q in values.index})


def _values(table: pd.DataFrame, measure: str, stratum: str) -> pd.Series:
    if measure not in table:
        return pd.Series(dtype=float)
    rows = table if stratum == ALL else table[table["stratum"] == stratum]
    return rows[measure].dropna()
