"""Corpus protocols: which candidates a model ranks for each query.

- ``pool``: the query's judged pool (the official CSFCube protocol).
- ``pooled``: all 4,205 CSFCube papers form one corpus; a first-stage model keeps the
  top ``depth`` for each request and the model reranks them.
- ``full``: the ~800k-abstract corpus (see `evalkit.corpus`), first stage by FAISS.

The seed paper itself is always excluded from its own candidates (explicitly, not
by an id coincidence); unjudged candidates count as non-relevant.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.csfcube import CSFCube, Paper, Query
from evalkit.errors import KitError
from evalkit.instructions import Request
from evalkit.models.base import Scorer
from evalkit.runs import ranked

PROTOCOLS = ("pool", "pooled", "full")


def pool_candidates(data: CSFCube, query: Query) -> list[Paper]:
    return [data.papers[pid] for pid in query.pool if pid != query.seed]


def top_candidates(first_stage: Scorer, request: Request, corpus: Sequence[Paper], depth: int) -> list[Paper]:
    """The first stage's top `depth` papers of `corpus` for a request, seed excluded."""
    others = [p for p in corpus if p.pid != request.seed.pid]
    scores = first_stage.score(request, others)
    by_pid = {p.pid: p for p in others}
    return [by_pid[pid] for pid in ranked(scores)[:depth]]


def check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise KitError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
