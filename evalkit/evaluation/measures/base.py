"""What a measure declares (`MeasureSpec`, a small value object), and what every declaration shares.

A measure family declares itself once, in its own module of this package, and the registration
list (`evalkit.evaluation.measures.registry`) names it; the parser, the per-query evaluator and
the aggregation (`evalkit.evaluation.evaluate`) read the declarations, so no name is a special
case anywhere else. A declaration says:

- its **name**: ``family``, then a cut-off ``@k`` (or ``%p`` with ``separator="%"``) that it
  ``NEEDS``, ``FORBIDS`` or takes as ``OPTIONAL``; ``help`` is how `MEASURE_HELP` writes it;
- **how it is computed**, one of three ways:
  - a ranking measure, per query from the run and the judgments, through the one
    `ir_measures.iter_calc` call: ``library`` (an ir_measures measure such as ``ir_measures.AP``;
    with ``binary`` it gets ``rel=`` the collection's relevance level) or ``build``
    (``(cutoff, relevance_level) -> ir_measures.Measure``, e.g. an ``ir_measures.define`` custom
    measure);
  - a per-query ``column`` computed from the whole collection and run
    (``(collection, run, options) -> pd.Series`` indexed by query; p-MRR over instruction pairs),
    named by its family, so it takes no cut-off; ``always``: every table of a collection it
    supports holds it, asked for or not (p-MRR); ``options`` carries the evaluator's settings
    (``pmrr_ties``);
  - one ``value`` for the whole table, read from other per-query measures (``inputs``:
    ``(cutoff) -> [names]``; ``value``: ``(collection, table, cutoff) -> float``; robustness@k);
- **what the collection must have** (``requires``: a `Collection` attribute such as ``pairs``,
  and ``requires_help``, what it is, for the one-line error);
- **how it aggregates** over queries: ``QUERY_MEAN`` (the collection's aggregate: the mean of
  the test folds' means where the collection has folds, else the plain mean), ``STRATUM_MEAN``
  (the plain mean per stratum, and over all queries the mean of the stratum means: p-MRR) or
  ``ONE_VALUE`` (its ``value``);
- how statistical tests pair it (``units``: ``QUERY`` or ``PAIR``, a pair's queries as one unit);
- its **name in other libraries** where one computes the same thing: ``ranx``, the ranx metric
  family (``ndcg``, ``map``; `evalkit.integrations.ranx` adds the cut-off and, for a ``binary``
  measure, ``-l`` and the relevance level), None where ranx has no equal.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Any

import ir_measures
import pandas as pd

from evalkit.core.errors import DataError, DeclarationError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import ranked

Qrels = Mapping[str, Mapping[str, int]]
RunScores = Mapping[str, Mapping[str, float]]

NEEDS, FORBIDS, OPTIONAL = "needs", "forbids", "optional"  # a declaration's cut-off rule
QUERY_MEAN, STRATUM_MEAN, ONE_VALUE = "query mean", "stratum mean", "one value"  # its aggregation
QUERY, PAIR = "query", "pair"  # the units statistical tests pair its values by
MAX_K = 1_000_000  # no collection ranks more candidates per query; beyond it numpy's integers overflow
_FAMILY = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


@dataclass(frozen=True)
class MeasureSpec:
    """One measure family's declaration (see the module docstring for each field)."""

    family: str
    help: str
    cutoff: str = OPTIONAL
    separator: str = "@"
    max_cutoff: int = MAX_K
    cutoff_note: str = ""  # why a FORBIDS measure takes no cut-off, for its error line
    binary: bool = False
    library: Any = None  # an ir_measures measure (ir_measures.nDCG, ir_measures.AP, ...)
    build: Callable[[int | None, int], ir_measures.Measure] | None = None
    column: Callable[[Collection, RunScores, Mapping[str, Any]], pd.Series] | None = None
    always: bool = False  # a `column` every table of a collection that `requires` it holds, asked or not
    inputs: Callable[[int | None], list[str]] | None = None
    value: Callable[[Collection, pd.DataFrame, int | None], float] | None = None
    requires: str | None = None
    requires_help: str = ""
    aggregate: str = QUERY_MEAN
    units: str = QUERY
    ranx: str | None = None  # the ranx metric family that computes the same (module docstring)

    def __post_init__(self) -> None:
        ways = [self.library is not None or self.build is not None, self.column is not None, self.value is not None]
        problems = [
            (not isinstance(self.family, str) or not _FAMILY.fullmatch(self.family),
             f"family {self.family!r} must be a name of letters, digits, '_' and '-' (no '@' or '%')"),
            (self.cutoff not in (NEEDS, FORBIDS, OPTIONAL), f"cutoff {self.cutoff!r} must be one of needs, forbids, "
                                                            "optional"),
            (self.separator not in ("@", "%"), f"separator {self.separator!r} must be '@' or '%'"),
            (sum(ways) != 1, "declare exactly one way to compute it: library or build, column, or value"),
            (self.library is not None and self.build is not None, "give library or build, not both"),
            (self.value is not None and self.aggregate != ONE_VALUE, "a value measure aggregates as ONE_VALUE"),
            (self.value is None and self.aggregate == ONE_VALUE, "ONE_VALUE needs a value function"),
            (self.aggregate not in (QUERY_MEAN, STRATUM_MEAN, ONE_VALUE), f"aggregate {self.aggregate!r} is unknown"),
            (self.units not in (QUERY, PAIR), f"units {self.units!r} must be query or pair"),
            (self.always and self.column is None, "always applies to a column measure only"),
            (self.ranx is not None and (self.library is None and self.build is None),
             "ranx names a ranx metric equal to a ranking measure (library or build)"),
            (self.column is not None and self.cutoff != FORBIDS,
             "a column measure takes no cut-off (its per-query column is named by its family); cutoff=FORBIDS"),
        ]
        for broken, why in problems:
            if broken:
                raise DeclarationError(f"measure {self.family!r}", why)

    @property
    def ranking(self) -> bool:
        """Computed per query by the ir_measures evaluator (`evalkit.evaluation.measures.judged_values`)."""
        return self.library is not None or self.build is not None

    def ir_measure(self, cutoff: int | None, relevance_level: int) -> ir_measures.Measure:
        """The ir_measures measure of a ranking declaration at `cutoff`; binary ones at ``rel=relevance_level``."""
        if self.build is not None:
            return self.build(cutoff, relevance_level)
        measure = self.library(rel=relevance_level) if self.binary else self.library
        return measure if cutoff is None else measure @ cutoff


@dataclass(frozen=True)
class Parsed:
    """A measure name read against the declarations: its declaration and its cut-off (None: none)."""

    spec: MeasureSpec
    name: str
    cutoff: int | None


# --- shared by the declarations ---------------------------------------------------------------


def check_cutoff(name: str, digits: str) -> int:
    """The cut-off written in a measure name: a positive integer of at most `MAX_K` (as ``--k``)."""
    if digits.startswith("0") and digits.strip("0"):
        raise RequestError("measures",
                           f"measure {name!r}: write the cut-off without leading zeros ({digits.lstrip('0')}), so that "
                           "one measure has one name")
    k = int(digits) if len(digits) <= len(str(MAX_K)) else MAX_K + 1
    if k < 1:
        raise RequestError("measures", f"measure {name!r}: cut-off k={k} must be a positive integer")
    if k > MAX_K:
        raise RequestError("measures", f"measure {name[:40]!r}: cut-off is absurdly large; give at most {MAX_K:,}")
    return k


def check_level(relevance_level: int) -> None:
    """One line unless the collection's relevance level is a positive integer grade."""
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, numbers.Integral) or relevance_level < 1:
        raise DataError(f"relevance_level={relevance_level!r}", "must be a positive integer grade "
                        "(e.g. 1, or 2 for CSFCube)")


def rank_scores(run: RunScores) -> dict[str, dict[str, float]]:
    """Strictly decreasing scores (n, n-1, ..., 1) along the kit's ranking of each query."""
    return {qid: dict(zip(ranked(scores), map(float, range(len(scores), 0, -1)))) for qid, scores in run.items()}


def _ranked_lists(qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[tuple[str, list[int]]]:
    """Per run query, the grades (unjudged = 0) of the documents the run ranked, best first."""
    grades = dict(zip(zip(qrels["query_id"].tolist(), qrels["doc_id"].tolist()), qrels["relevance"].tolist()))
    rows = sorted(zip(run["query_id"].tolist(), run["score"].tolist(), run["doc_id"].tolist()),
                  key=lambda row: (row[0], -row[1]))
    for qid, group in groupby(rows, key=itemgetter(0)):
        yield qid, [grades.get((qid, doc), 0) for _, _, doc in group]


def whole_list_measure(name: str, value: Callable[[Sequence[int]], float]) -> ir_measures.Measure:
    """A custom ir_measures measure of each query's whole ranked grade list (`value` of the grades).

    Defined without ir_measures' cut-off parameter, which would truncate the run to its top
    k before the measure sees it; the official measures need every ranked grade. The
    implementation takes all queries at once (`define`, not `define_byquery`, whose
    per-query DataFrame filtering took about 4x longer on the benchmark run).
    """

    def impl(qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[tuple[str, float]]:
        for qid, grades in _ranked_lists(qrels, run):
            yield qid, value(grades)

    return ir_measures.define(impl, name=name, support_cutoff=False)
