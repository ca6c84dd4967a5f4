"""A perfect pairwise judge from relevance grades: the upper bound of PRP, and the check of the sorts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalkit.llm.prp import Compare


def oracle(grades: Mapping[str, float]) -> Compare:
    """x's share of the win: 1 if graded higher than y, 0 if lower, 0.5 if equal (ungraded counts as 0)."""

    def compare(pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        for x, y in pairs:
            gx, gy = grades.get(x, 0), grades.get(y, 0)
            out.append(1.0 if gx > gy else 0.0 if gx < gy else 0.5)
        return out

    return compare
