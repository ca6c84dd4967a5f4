"""The one evaluation every front end calls: per-query tables of some runs, under one checked
request (`evalkit.evaluation.request`), to summaries, notes, paired tests and the runs x
measures table.

`evalkit evaluate` (run files it reads), `evalkit.api.evaluate` (the runs it makes, per
variant, with a reference) and `Evaluation.compare_table` all go through `score_runs` and
`evaluate_tables`; none repeats the sequence. The first run of an `Outcome` is the reference the
paired tests compare the others with.

Twin measures: with the default table, a measure that equals another on every query of every
run compared (`evalkit.evaluation.evaluate.SAME_WHEN_EQUAL`: the release's MAP_csfcube and
trec's AP on the pool protocols) is printed once, under the other (``same_as``); the data
(per-query tables, JSON, ``Evaluation.table``) keep both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from evalkit.data.collection import Collection
from evalkit.data.runs import Run
from evalkit.evaluation.compare import compare
from evalkit.evaluation.compare_table import ComparisonTable, compare_table
from evalkit.evaluation.evaluate import (
    compared_measures,
    computed_measures,
    fold_notes,
    per_query,
    shown_once,
    summary_of,
)
from evalkit.evaluation.request import CheckedEvaluation
from evalkit.evaluation.stats import PairedTestSettings


@dataclass
class Outcome:
    """Runs evaluated under one checked request. `collection`: as the protocol judges it;
    `tables`: run label -> per-query values (the first: the reference of the tests);
    `aggregate`: the aggregation used (``mean`` on a collection without folds); `twins`:
    {measure printed once: the measure it is printed under}."""

    collection: Collection
    checked: CheckedEvaluation
    tables: dict[str, pd.DataFrame]
    aggregate: str
    twins: dict[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every measure asked for (the data's)."""
        return list(self.checked.names)

    @property
    def shown(self) -> list[str]:
        """The measures a printed table shows: the twins left out."""
        return [n for n in self.checked.names if n not in self.twins]

    @property
    def compared(self) -> list[str]:
        """The measures paired tests compare (a one-value measure has no per-query values)."""
        return compared_measures(self.names)

    def summary(self, label: str, names: list[str] | None = None, settings: dict | None = None) -> dict:
        """{measure: {stratum..., "all": value}, "queries": ..., "settings": ...} of one run."""
        return summary_of(self.collection, self.tables[label], self.names if names is None else names,
                          self.aggregate, {} if settings is None else settings)

    def notes(self, label: str) -> list[str]:
        """Where the fold aggregate is undefined on the run's queries (`fold_notes`)."""
        return fold_notes(self.collection, self.tables[label], self.aggregate)

    def labelled_notes(self) -> list[str]:
        """Every run's fold notes, each prefixed by its run, sorted and once."""
        return sorted({f"{label}: {note}" for label in self.tables for note in self.notes(label)})

    def tests(self, measures: list[str] | None = None) -> pd.DataFrame:
        """Paired tests of every pair of runs, Holm-adjusted over the pairs of each measure and
        stratum (`evalkit.evaluation.compare.compare`): the very p-values the table's marks come from."""
        test = self.checked.test
        return compare(self.collection, self.tables, self.compared if measures is None else measures,
                       self.aggregate, alpha=test.alpha, **test.arguments())

    def table(self, measures: list[str] | None = None, test: PairedTestSettings | None = None) -> ComparisonTable:
        """The runs x measures table (`evalkit.evaluation.compare_table.compare_table`) under the
        request's test, or `test` (a comparison asked for later, checked by `check_test`); its notes
        end with the runs' fold notes (`labelled_notes`), so they print with the table."""
        test = self.checked.test if test is None else test
        names = [n for n in self.compared if n not in self.twins] if measures is None else measures
        table = compare_table(self.collection, self.tables, names, self.aggregate, alpha=test.alpha,
                              **test.arguments())
        table.notes += self.labelled_notes()
        return table


def score_runs(judged: Collection, runs: Mapping[str, Run], checked: CheckedEvaluation) -> dict[str, pd.DataFrame]:
    """Each run's per-query table on `judged` (the collection as the protocol judges it)."""
    names = computed_measures(checked.names)
    return {label: per_query(judged, run, names, checked.pmrr_ties) for label, run in runs.items()}


def evaluate_tables(judged: Collection, tables: Mapping[str, pd.DataFrame], checked: CheckedEvaluation) -> Outcome:
    """The `Outcome` of per-query tables (`score_runs`) under `checked`; the first is the reference."""
    tables = dict(tables)
    aggregate = checked.aggregate if judged.folds else "mean"
    twins = shown_once(list(checked.names), tables.values())[1] if checked.default else {}
    return Outcome(judged, checked, tables, aggregate, twins)
