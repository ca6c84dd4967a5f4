"""The ``bm25`` family: BM25 as bm25s' published benchmark (`evalkit.models.bm25`); the entry's
settings are BM25's arguments."""

from __future__ import annotations

import inspect

from evalkit.core.errors import KitError
from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import Family


def build(settings: dict, profile: str, collection: Collection) -> Scorer:
    from evalkit.models.bm25 import BM25  # lazy: bm25s loads numba and scipy (start-up cost), needed only to rank

    unknown = sorted(set(settings) - set(inspect.signature(BM25).parameters))
    if unknown:
        raise KitError(f"BM25 has no setting {unknown[0]!r}; its settings are "
                       f"{', '.join(inspect.signature(BM25).parameters)}")
    return BM25(**settings)


FAMILY = Family("bm25", build)
