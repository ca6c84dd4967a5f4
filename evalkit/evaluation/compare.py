"""Paired comparison of runs: every pair of runs tested on the per-query differences, the p-values
Holm-adjusted over all pairs of runs of one measure and stratum, per stratum and overall; the
one computation behind the rows (``evalkit evaluate`` with rows or JSON, ``result.tests``) and
the marks of the runs x measures table (`evalkit.evaluation.compare_table`), so each mark is a
row's ``p_holm`` below ``alpha``.

`compare` takes per-query tables (`evalkit.evaluation.evaluate.per_query`) of several runs on one
collection, the first the reference. For every measure, stratum (CSFCube's facets) and ``all``:
the reference's row (``against`` blank, ``note`` ``reference``), then one row per pair of runs,
``run`` against ``against`` (an earlier run: with two runs, the one row is the run against the
reference):

- ``aggregate``: ``run``'s value as the measures table prints it (`evalkit.evaluation.evaluate.summarize`:
  the mean of the two test-fold means where the collection has folds, p-MRR the mean of the
  stratum means). It is the fold aggregate, not what is tested: the two can differ in sign;
- ``delta``: the mean over the paired units of (run - against), the quantity ``t`` and ``p``
  test (`evalkit.evaluation.stats.paired_test`: same units, same sign). Units are the stratum's queries
  both runs have a value for; for p-MRR a seed's queries are one unit (its facets are one pair
  of instructions scored both ways, not independent queries: `pair_units`);
- ``t``, ``p`` (paired two-sided t-test; or Fisher's randomization test, ``test="fisher"``,
  whose statistic is ``delta`` itself, ``t`` blank), ``p_holm`` (Holm, `evalkit.evaluation.stats.holm`,
  over the `family` of that measure and stratum, `evalkit.evaluation.stats.FAMILIES`: every pair
  of runs, or each run against the reference; ``adjust="none"`` leaves it raw), ``n`` (paired
  units), ``better`` (the run of the pair marked significantly better: ``p_holm`` < ``alpha``
  and ``delta`` not 0; blank when neither is), ``note`` (why ``p`` is blank: fewer than
  `evalkit.evaluation.stats.MIN_PAIRED` units, no variance).

Runs with no query in common are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import pandas as pd

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.evaluate import paired_by_units, summarize
from evalkit.evaluation.stats import (
    ALPHA,
    PERMUTATION_SEED,
    PERMUTATIONS,
    check_computed,
    holm,
    paired_test,
)

COLUMNS = ["measure", "stratum", "run", "against", "aggregate", "delta", "t", "p", "p_holm", "n", "better", "note"]
ADJUST = ("holm", "none")


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
            raise DataError(f"runs {names[0]} and {name}", "have no query in common, so there is nothing to pair; "
                            "compare runs of the same queries")


def check_adjust(adjust: object) -> str:
    """The p-value adjustment over a comparison's pairs: one of `ADJUST`."""
    if adjust not in ADJUST:
        raise RequestError("adjust", "choose holm or none", value=adjust)
    return adjust


def tested_pairs(names: Sequence[str], family: str) -> list[tuple[str, str]]:
    """(run, against) of every test of `family`: each run against every earlier one (``pairs``),
    or each run against the first (``reference``)."""
    pairs = [(run, against) for against, run in combinations(names, 2)]
    return pairs if family == "pairs" else [(run, against) for run, against in pairs
                                                        if against == names[0]]


def pair_test(collection: Collection, table: pd.DataFrame, reference: pd.DataFrame, measure: str, stratum: str,
              test: str = "t", permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED):
    """`evalkit.evaluation.stats.paired_test` of `table` against `reference` over a stratum's units."""
    return paired_test(_values(table, measure, stratum), _values(reference, measure, stratum), test,
                       units_of(collection, measure), permutations, seed)


def compare(collection: Collection, tables: Mapping[str, pd.DataFrame], measures: Sequence[str],
            aggregate_by: str = "folds", test: str = "t", permutations: int = PERMUTATIONS,
            seed: int = PERMUTATION_SEED, alpha: float = ALPHA, adjust: str = "holm",
            family: str = "pairs") -> pd.DataFrame:
    """The rows of the module docstring: per measure and stratum, the first run's row (``note``
    ``reference``), then one row per pair of runs of `family` (`FAMILIES`: every pair, or each run
    against the first); the one computation of the pairwise tests, their Holm adjustment over that
    family and the marks `evalkit.evaluation.compare_table` prints."""
    check_adjust(adjust)
    check_computed(test, permutations, seed, alpha, family)  # the request's one rule, before any test runs
    pairs = tested_pairs(list(tables), family)
    check_common(tables)
    names = list(tables)
    summaries = {name: summarize(collection, table, aggregate_by) for name, table in tables.items()}
    strata = list(dict.fromkeys(collection.strata.values()))
    rows = []
    for measure in measures:
        for stratum in [*strata, ALL]:
            results = {(run, against): pair_test(collection, tables[run], tables[against], measure, stratum, test,
                                                 permutations, seed)
                       for run, against in pairs}
            raw = {pair: r.pvalue for pair, r in results.items()}
            adjusted = holm(raw) if adjust == "holm" else raw
            reference = names[0]
            rows.append({"measure": measure, "stratum": stratum, "run": reference, "against": "",
                         "aggregate": _aggregate(summaries, reference, measure, stratum), "delta": math.nan,
                         "t": math.nan, "p": math.nan, "p_holm": math.nan,
                         "n": _units(collection, tables[reference], measure, stratum), "better": "",
                         "note": "reference"})
            for (run, against), result in results.items():
                p = adjusted[run, against]
                marked = not math.isnan(p) and p < alpha and result.delta != 0
                rows.append({"measure": measure, "stratum": stratum, "run": run, "against": against,
                             "aggregate": _aggregate(summaries, run, measure, stratum), "delta": result.delta,
                             "t": result.statistic if test == "t" else math.nan, "p": result.pvalue, "p_holm": p,
                             "n": result.n, "better": (run if result.delta > 0 else against) if marked else "",
                             "note": result.note or ""})
    return pd.DataFrame(rows, columns=COLUMNS)


def _aggregate(summaries: Mapping[str, dict], name: str, measure: str, stratum: str) -> float:
    return summaries[name].get(measure, {}).get(stratum, math.nan)


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
