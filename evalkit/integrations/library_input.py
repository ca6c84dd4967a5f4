"""What the kit hands another evaluation library, so that its figures are the kit's.

- `judgments(collection, protocol)`: the graded judgments a protocol scores against
  (`Collection.judged`: under ``pool``, ``pooled`` and ``full`` a query's excluded seed is neither
  ranked nor judged; under ``released`` nothing is excluded), restricted to the queries given;
- `ranked_scores(run)`: each query's scores replaced by strictly decreasing ones (n, ..., 1)
  along the kit's ranking (`evalkit.evaluation.measures.rank_scores`: score descending, then document id
  ascending), so a library's own tie rule (trec_eval's and ranx's: document id descending, or
  input order) never applies. With ``keep_scores=True`` the callers hand the raw scores instead:
  the figures are then the library's own on tied scores.

What they are handed is asked for as every front end asks: `library_request` fills an
`evalkit.evaluation.request.EvaluationRequest` (the protocol, the seeds or query ids, the
measures) and `checked` holds the run to its rules (`check_options` before the run is read,
then `check_request` against the collection: the same functions, the same lines, as the API's
and the CLI's), so a request ranx or ir_measures is handed the kit refuses in no other words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.data.protocols import DEFAULT_PROTOCOL, check_protocol_run, protocol_collection
from evalkit.data.runs import Run, is_finite_score
from evalkit.evaluation.measures import rank_scores
from evalkit.evaluation.request import CheckedEvaluation, EvaluationRequest, check_options, check_request

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


def library_request(collection: Collection, protocol: str = "pool", *, seeds: object = None, queries: object = None,
                    measures: object = None) -> EvaluationRequest:
    """The request a library's input answers: `collection`'s, under `protocol`, on the queries of
    `seeds` or `queries` (None: the run's), for `measures` (None: the collection's default table)."""
    return EvaluationRequest(dataset=collection.name, protocol=protocol, seeds=seeds, queries=queries,
                             measures=measures)


def checked_request(request: EvaluationRequest, collection: Collection) -> CheckedEvaluation:
    """`request` under its rules (`check_request`) against `collection` as its protocol judges it."""
    return check_request(request, protocol_collection(collection, request.protocol or DEFAULT_PROTOCOL))


def checked(run: Run, collection: Collection, protocol: str, *, seeds: object = None, queries: object = None,
            measures: object = None) -> tuple[Run, CheckedEvaluation]:
    """`run` after the kit's checks, restricted to the selected queries, and the checked request
    (`library_request`): the request's rules that need no collection (the protocol named:
    before the run is read), the run's shape (`check_shape`: a ranking per query, finite scores),
    known queries and, on the pool protocols, only each query's candidates as the protocol gives
    them (`check_protocol_run`), then the rest of the request's rules against the collection as
    the protocol judges it (the measures, the seeds or query ids: `check_request`)."""
    request = library_request(collection, protocol, seeds=seeds, queries=queries, measures=measures)
    check_options(request)
    check_shape(run)
    judged = check_protocol_run(run, collection, protocol)
    request_checked = check_request(request, judged)
    chosen = request_checked.queries
    if chosen is not None:
        run = {qid: run[qid] for qid in chosen if qid in run}
    return run, request_checked


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
