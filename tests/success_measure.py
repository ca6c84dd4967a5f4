"""A measure family declared the way the kit declares its own (one file), for tests/evaluation/test_declarations.py.

- ``Success@k``: 1 when a document of grade >= the collection's relevance level is in the top k
  of the query's ranking (the kit's tie rule), else 0; a ranking measure (ir_measures custom
  measure), aggregated as the collection's query mean.
- ``Worst@k``: the minimum ``Success@k`` over the table's queries: one value, read from the
  per-query ``Success@k`` it asks for.
- ``Ranked``: how many documents the run ranks for each query, a per-query column computed from
  the collection and the run; it requires given candidate lists.

Nothing is registered on import: a test registers them (`evalkit.evaluation.measures.registered`).
"""

from __future__ import annotations

import ir_measures
import pandas as pd

from evalkit.evaluation.measures import FORBIDS, NEEDS, ONE_VALUE, MeasureSpec


def success_measure(k: int, level: int) -> ir_measures.Measure:
    """Success@k at grade >= level as an ir_measures custom measure (all queries at once)."""

    def impl(qrels: pd.DataFrame, run: pd.DataFrame):
        relevant = {(q, d) for q, d, g in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"]) if g >= level}
        for qid, group in run.groupby("query_id"):
            top = group.sort_values("score", ascending=False)["doc_id"].head(k)
            yield qid, float(any((qid, d) in relevant for d in top))

    return ir_measures.define(impl, name=f"Success_g{level}@{k}", support_cutoff=False)


SUCCESS = MeasureSpec("Success", "Success@k", cutoff=NEEDS, binary=True, build=success_measure)
WORST = MeasureSpec("Worst", "Worst@k", cutoff=NEEDS, inputs=lambda k: [f"Success@{k}"],
                    value=lambda collection, table, k: float(table[f"Success@{k}"].min()), aggregate=ONE_VALUE)
RANKED = MeasureSpec("Ranked", "Ranked", cutoff=FORBIDS,
                     column=lambda collection, run, options: pd.Series({q: float(len(d)) for q, d in run.items()}),
                     requires="candidates", requires_help="given candidate lists")
