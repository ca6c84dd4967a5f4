"""Runs and judgments as ir_measures iterables: `to_ir_measures(run, collection)` gives
``(qrels, run)`` lists of ``ir_measures.Qrel`` and ``ir_measures.ScoredDoc``, which
``ir_measures.calc_aggregate`` / ``iter_calc`` (and any tool reading ir_measures' named tuples)
evaluate.

The same inputs as `evalkit.integrations.ranx`: the protocol's judgments for the queries the
run ranks, and strictly decreasing scores along the kit's ranking, so trec_eval's tie rule
(document id descending) never applies. With the measures of `evalkit.evaluation.measures.parse_measure`
(``nDCG@20``, ``AP(rel=2)``, ``nDCG_csfcube@20``, ...) ir_measures then gives the kit's figures
(tests/integrations/test_integrations_runs.py). `ir_measures_of(measures, collection)` gives those
measures of a list of kit names. Each takes what the API's `evaluate` takes for the same thing
(``protocol``, ``seeds`` or ``queries``, ``measures``), checked by the same rules: an
`evalkit.evaluation.request.EvaluationRequest` (`evalkit.integrations.library_input.checked`).
"""

from __future__ import annotations

from collections.abc import Sequence

import ir_measures

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run, ranked
from evalkit.evaluation.measures import parse, parse_measure
from evalkit.integrations.library_input import checked, checked_request, judgments, library_request, ranked_scores


def to_ir_measures(run: Run, collection: Collection, protocol: str = "pool", keep_scores: bool = False, *,
                   seeds: Sequence[str] | None = None, queries: Sequence[str] | None = None,
                   ) -> tuple[list[ir_measures.Qrel], list[ir_measures.ScoredDoc]]:
    """``([Qrel(query_id, doc_id, relevance)], [ScoredDoc(query_id, doc_id, score)])``, the run's
    documents listed best first under the kit's tie rule, on the queries of `seeds` or `queries`
    where given (`evalkit.data.collection.select_queries`)."""
    run, _ = checked(run, collection, protocol, seeds=seeds, queries=queries)
    judged = judgments(collection, protocol, run)
    if not judged:
        raise DataError("run", f"none of its queries is judged in {collection.name}; check the query ids")
    qrels = [ir_measures.Qrel(qid, doc, grade) for qid, grades in judged.items() for doc, grade in grades.items()]
    scores = ranked_scores({qid: run[qid] for qid in judged}, keep_scores)
    scored = [ir_measures.ScoredDoc(qid, doc, docs[doc]) for qid, docs in scores.items() for doc in ranked(docs)]
    return qrels, scored


def ir_measures_of(measures: Sequence[str], collection: Collection, protocol: str = "pool") -> dict:
    """{ir_measures measure: kit name} of `measures` on `collection`: the request's measures (a list,
    none twice, each parsed against the collection: `check_request`, as every front end's), each
    as ir_measures computes it at the collection's relevance level
    (`evalkit.evaluation.measures.parse_measure`); for ``ir_measures.iter_calc(list(found), qrels, run)``.
    A measure only the kit computes (p-MRR, robustness@k) is refused in one line."""
    names = checked_request(library_request(collection, protocol, measures=measures), collection).names
    kit_only = next((n for n in names if not parse(n).spec.ranking), None)
    if kit_only is not None:
        raise RequestError("measures", f"{kit_only} is computed by the kit only (not per ranking); evaluate it with "
                           "evalkit.evaluate or evalkit evaluate")
    return {parse_measure(name, collection.relevance_level): name for name in names}
