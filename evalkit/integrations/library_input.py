"""What the kit hands another evaluation library, so that its figures are the kit's.

- `judgments(collection, protocol)`: the graded judgments a protocol scores against
  (`Collection.judged`: under ``pool``, ``pooled`` and ``full`` a query's excluded seed is neither
  ranked nor judged; under ``released`` nothing is excluded), restricted to the queries given;
- `ranked_scores(run)`: each query's scores replaced by strictly decreasing ones (n, ..., 1)
  along the kit's ranking (`evalkit.evaluation.measures.rank_scores`: score descending, then document id
  ascending), so a library's own tie rule (trec_eval's and ranx's: document id descending, or
  input order) never applies. With ``keep_scores=True`` the callers hand the raw scores instead:
  the figures are then the library's own on tied scores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.data.protocols import check_protocol, check_protocol_run, protocol_collection
from evalkit.data.runs import Run, is_finite_score
from evalkit.evaluation.measures import rank_scores

PROTOCOLS_JUDGED_AS_POOL = ("pool", "pooled", "full")


def judgments(collection: Collection, protocol: str = "pool",
              queries: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """``{qid: {doc: grade}}`` as `protocol` judges `collection`, for `queries` (default: all judged)."""
    judged = protocol_collection(collection, protocol).judged
    chosen = list(judged) if queries is None else [q for q in queries if q in judged]
    return {qid: {doc: int(grade) for doc, grade in judged[qid].items()} for qid in chosen}


def ranked_scores(run: Mapping[str, Mapping[str, float]], keep_scores: bool = False) -> Run:
    """The run as a library should see it (module docstring)."""
    if keep_scores:
        return {qid: {doc: float(s) for doc, s in scores.items()} for qid, scores in run.items()}
    return rank_scores(run)


def checked(run: Run, collection: Collection, protocol: str) -> Run:
    """`run` after the kit's checks: the protocol named (`check_protocol`), the run's shape
    (`check_shape`: a ranking per query, finite scores), known queries and, on the pool
    protocols, only each query's candidates as the protocol gives them (`check_protocol_run`)."""
    check_protocol(protocol)
    check_shape(run)
    check_protocol_run(run, collection, protocol)
    return run


def check_shape(run: object) -> None:
    """``{qid: {doc: score}}`` with at least one query, each ranking a non-empty mapping and every
    score a finite number (a NaN or infinite score has no rank, and a library would rank it
    somewhere of its own choosing): else one line naming the query and the document."""
    if not isinstance(run, Mapping):
        raise DataError("run", f"expected {{qid: {{doc: score}}}}, got a {type(run).__name__}; read a run file with "
                        "evalkit.data.runs.read_trec")
    if not run:
        raise DataError("run", "the run ranks no queries; give a ranking for at least one query")
    for qid, scores in run.items():
        if not isinstance(scores, Mapping):
            raise DataError("run", f"query {qid}: expected {{doc: score}}, got a {type(scores).__name__}; give each "
                            "query's documents with their scores")
        if not scores:
            raise DataError("run", f"query {qid} ranks no document; drop the query or give its ranking")
        for doc, score in scores.items():
            if not is_finite_score(score):
                raise DataError("run", f"query {qid}: document {doc} has the score {score!r:.40}; give every document "
                                "a finite number")
