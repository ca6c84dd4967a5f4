"""The per-query table of ranking measures: every ranking declaration through one `ir_measures.iter_calc`.

Before ir_measures sees a run, `rank_scores` replaces each query's scores by strictly decreasing
ones along the kit's ranking, so library tie rules never apply. Measures computed from more than
one query's ranking (p-MRR's column, robustness@k's one value) are the evaluator's
(`evalkit.evaluation.evaluate`), which reads the same declarations.
"""

from __future__ import annotations

from collections.abc import Sequence

import ir_measures
import pandas as pd

from evalkit.core.errors import RequestError
from evalkit.evaluation.measures.base import Qrels, RunScores, check_level, rank_scores
from evalkit.evaluation.measures.registry import parse


def parse_measure(name: str, relevance_level: int) -> ir_measures.Measure:
    """The ir_measures measure for a ranking measure name; binary measures get ``rel=relevance_level``."""
    parsed = parse(name)
    if not parsed.spec.ranking:
        raise RequestError("measures",
                           f"measure {name!r} is not computed from one query's ranking; evaluate it on a collection "
                           "(evalkit.evaluation.evaluate.per_query)")
    return parsed.spec.ir_measure(parsed.cutoff, relevance_level)


def judged_values(qrels: Qrels, run: RunScores, measures: Sequence[str], relevance_level: int) -> pd.DataFrame:
    """One row per run query (index ``qid``, sorted), one column per measure name as given.

    NaN for run queries without judgments (absent from qrels or with an empty entry); a judged
    query the run ranks no document for gets 0. The run is ranked with the kit's tie rule first.
    """
    names = list(measures)
    check_level(relevance_level)
    if len(set(names)) < len(names):
        raise RequestError("measures", f"measure names repeat in {names}; list each measure once")
    by_measure = {parse_measure(name, relevance_level): name for name in names}
    table = pd.DataFrame(index=pd.Index(sorted(run), name="qid"), columns=names, dtype=float)
    judged = {qid: dict(qrels[qid]) for qid in run if qrels.get(qid)}  # libraries score every qrels query
    if not judged or not names:
        return table
    scored = rank_scores({qid: run[qid] for qid in judged})
    values: dict[str, dict[str, float]] = {name: {} for name in names}
    for metric in ir_measures.iter_calc(list(by_measure), judged, scored):
        values[by_measure[metric.measure]][metric.query_id] = float(metric.value)
    for name, column in values.items():
        table[name] = pd.Series(column, dtype=float).reindex(table.index)
    return table
