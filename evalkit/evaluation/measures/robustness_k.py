"""``robustness@k`` (InstructIR): the mean over query groups of the minimum nDCG@k of a group's instances.

Declared as one value for the whole table, read from the per-query ``nDCG@k`` it asks for;
every instance needs a value. It needs the collection's query groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.evaluation.measures.base import NEEDS, ONE_VALUE, MeasureSpec

ROBUSTNESS = "robustness"


def robustness(values: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> float:
    """InstructIR robustness: mean over groups of the minimum per-instance value; NaN without groups."""
    minima = []
    for group, qids in groups.items():
        scores = [values.get(q, math.nan) for q in qids]
        missing = [q for q, s in zip(qids, scores) if s is None or math.isnan(s)]
        if missing or not qids:
            what = f"instance {missing[0]}" if missing else "any instance"
            raise DataError("per-query values", f"no value for {what} of query {group!r}; evaluate every instance")
        minima.append(min(scores))
    return sum(minima) / len(minima) if minima else math.nan


def _ndcg(k: int | None) -> str:
    return f"nDCG@{k}"


def _value(collection: Collection, table: pd.DataFrame, k: int | None) -> float:
    return robustness(table[_ndcg(k)].to_dict(), collection.groups)


ROBUSTNESS_AT_K = MeasureSpec(ROBUSTNESS, f"{ROBUSTNESS}@k", cutoff=NEEDS, inputs=lambda k: [_ndcg(k)], value=_value,
                              aggregate=ONE_VALUE, requires="groups", requires_help="query groups (InstructIR)")
