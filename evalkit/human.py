"""The Human reference row on CSFCube.

Recipe (pool): for each query, rank its judged pool by one annotator's grades (ties by the
kit's rule: document id), score that ranking against the adjudicated grades, and average
the per-query values over the query's two annotators ("first" and "second" by annotator
number). p-MRR pairs the same annotator slot across a seed's two facets. The paper does not
publish its recipe; this one lands near its row.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from evalkit.collection import Collection
from evalkit.datasets.csfcube import CSFCube, to_collection
from evalkit.evaluation import per_query
from evalkit.runs import Run


def annotator_run(data: CSFCube, slot: int) -> Run:
    """A run whose scores are the grades of each query's `slot`-th annotator (0 or 1)."""
    return {
        qid: {doc: float(g) for doc, g in list(q.annotators.values())[slot].items()}
        for qid, q in data.queries.items()
    }


def human_per_query(data: CSFCube, measures: Sequence[str], collection: Collection | None = None) -> pd.DataFrame:
    """Per-query values of the Human reference: the mean over the two annotator slots."""
    collection = collection or to_collection(data)
    first, second = (per_query(collection, annotator_run(data, slot), measures) for slot in (0, 1))
    numeric = first.columns.difference(["stratum", "fold"])
    averaged = first.copy()
    averaged[numeric] = (first[numeric] + second[numeric]) / 2
    return averaged
