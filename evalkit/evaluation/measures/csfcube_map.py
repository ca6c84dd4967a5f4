"""``MAP_csfcube``: the CSFCube release's ``average_precision`` per query (its MAP once aggregated).

The mean of precision@r over the ranks r of the relevant documents in the run's ranked list
(grade >= the collection's relevance level), 0 when the list holds none. Unlike trec_eval's AP
it divides by the relevant documents the run ranked, not by every judged one; it reads the whole
list, so it takes no cut-off.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import ir_measures

from evalkit.evaluation.measures.base import FORBIDS, MeasureSpec, whole_list_measure

CSFCUBE_MAP = "MAP_csfcube"


def average_precision_listed(ranked_relevant: Sequence[bool]) -> float:
    """The release's average precision: mean precision@r at the relevant ranks r of the list; 0 without any."""
    hits, total = 0, 0.0
    for rank, relevant in enumerate(ranked_relevant, start=1):
        if relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


@cache
def csfcube_map_measure(relevance_level: int) -> ir_measures.Measure:
    """``MAP_csfcube`` (per query: `average_precision_listed`) as an ir_measures custom measure."""
    return whole_list_measure(
        CSFCUBE_MAP, lambda grades: average_precision_listed([g >= relevance_level for g in grades]))


MAP_CSFCUBE = MeasureSpec(CSFCUBE_MAP, CSFCUBE_MAP, cutoff=FORBIDS, cutoff_note="it reads the whole ranked list",
                          binary=True, build=lambda _k, level: csfcube_map_measure(level))
