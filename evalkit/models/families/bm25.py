"""The ``bm25`` family: BM25 as bm25s' published benchmark (`evalkit.models.bm25`); the entry's
settings are BM25's arguments."""

from __future__ import annotations

import inspect

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import Family


def build(settings: dict, profile: str, collection: Collection) -> Scorer:
    from evalkit.models.bm25 import BM25  # lazy: bm25s loads numba and scipy (start-up cost), needed only to rank

    return BM25(**settings)


def settings(entry: dict) -> tuple[str, ...]:
    """BM25's arguments (read from the class, which loads only when asked)."""
    from evalkit.models.bm25 import BM25  # lazy, as in `build`

    return tuple(inspect.signature(BM25).parameters)


FAMILY = Family("bm25", build, settings=settings)
