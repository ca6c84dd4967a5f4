"""The evaluation protocols, in one home: their names, the collection each protocol ranks and
judges (`protocol_collection`), and the rule a run someone gives must follow under it
(`check_protocol_run`). Below the runner and the evaluation layer, which both import it.

- ``pool``: each query's given candidates (CSFCube's judged pool, FollowIR's top-ranked list),
  its excluded document (CSFCube's seed) neither ranked nor judged; a collection without
  candidate lists is ranked over its whole corpus (the runner keeps the top 1,000);
- ``released``: the pool protocol with nothing excluded (`Collection.including_excluded`):
  CSFCube's pools as released, the seed ranked and judged, as every published CSFCube row was
  computed;
- ``pooled``: a first-stage model ranks the collection's whole document set and keeps each
  query's top ``depth``; the model reranks them; unjudged documents count as non-relevant;
- ``full``: as ``pooled``, but the first stage ranks a corpus file (CSFCube's ~800k abstracts,
  `Collection.read_corpus`), streamed; the model reranks the first stage's top ``depth``.

A run given on a pool protocol may rank only each query's candidates as that protocol gives
them; on ``pooled`` and ``full`` it may rank any document.
"""

from __future__ import annotations

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run

PROTOCOLS = ("pool", "released", "pooled", "full")
POOL_PROTOCOLS = ("pool", "released")  # each query's given candidates, no first stage
FIRST_STAGE_PROTOCOLS = ("pooled", "full")  # a first stage ranks beyond the candidates, the model reranks
RELEASED = "released"  # the protocol that ranks and judges a collection as released, nothing excluded
DEFAULT_PROTOCOL = "pool"


def check_protocol(protocol: object, field: str = "protocol") -> str:
    """The one check of a protocol name (every front end's); returns it."""
    if protocol not in PROTOCOLS:
        raise RequestError(field, f"choose one of {', '.join(PROTOCOLS)}", value=protocol)
    return protocol


def protocol_collection(collection: Collection, protocol: str) -> Collection:
    """The collection as a protocol ranks and judges it: ``released`` excludes nothing
    (`Collection.including_excluded`), every other protocol excludes what the collection does."""
    return collection.including_excluded() if check_protocol(protocol) == RELEASED else collection


def check_run(run: Run, collection: Collection, source: str = "run", within_candidates: bool = True) -> None:
    """Reject an empty run, queries the collection lacks and, with `within_candidates`,
    documents outside a query's given candidate list (its excluded document included)."""
    if not run:
        raise DataError(source, "the run ranks no queries; check the file (and {name} for official files)")
    for qid, scores in run.items():
        if qid not in collection.queries:
            raise DataError(source, f"unknown query {qid}; {collection.name} has no such query")
        if within_candidates and collection.candidates is not None:
            allowed = set(collection.candidates.get(qid, ())) - {collection.exclude.get(qid)}
            outside = sorted(set(scores) - allowed)
            if outside == [collection.exclude.get(qid)]:
                raise DataError(source, f"{qid} ranks its excluded document {outside[0]} (its seed); drop it, or "
                                f"give {{protocol:{RELEASED}}} to evaluate the pools as released")
            if outside:
                raise DataError(source, f"document {outside[0]} for {qid} is outside the query's candidate list; "
                                "rank only the given candidates or give {protocol:pooled}")


def check_protocol_run(run: Run, collection: Collection, protocol: str, source: str = "run") -> Collection:
    """`check_run` as `protocol` judges `collection`, and that collection (`protocol_collection`).

    On the pool protocols (``pool``, ``released``) every document must be one of the query's
    candidates as the protocol gives them (``released``: the seed included); the pooled and
    full protocols rank beyond the candidates. The one rule for a run a user gives: the CLI's
    ``--runs``, the API's ``reference=`` and the runs handed to ranx and ir_measures."""
    judged = protocol_collection(collection, protocol)
    check_run(run, judged, source=source, within_candidates=protocol in POOL_PROTOCOLS)
    return judged
