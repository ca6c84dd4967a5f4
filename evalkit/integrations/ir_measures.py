"""Runs and judgments as ir_measures iterables: `to_ir_measures(run, collection)` gives
``(qrels, run)`` lists of ``ir_measures.Qrel`` and ``ir_measures.ScoredDoc``, which
``ir_measures.calc_aggregate`` / ``iter_calc`` (and any tool reading ir_measures' named tuples)
evaluate.

The same inputs as `evalkit.integrations.ranx`: the protocol's judgments for the queries the
run ranks, and strictly decreasing scores along the kit's ranking, so trec_eval's tie rule
(document id descending) never applies. With the measures of `evalkit.evaluation.measures.parse_measure`
(``nDCG@20``, ``AP(rel=2)``, ``nDCG_csfcube@20``, ...) ir_measures then gives the kit's figures
(tests/integrations/test_integrations_runs.py).
"""

from __future__ import annotations

import ir_measures

from evalkit.core.errors import DataError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run, ranked
from evalkit.integrations.library_input import checked, judgments, ranked_scores


def to_ir_measures(run: Run, collection: Collection, protocol: str = "pool",
                   keep_scores: bool = False) -> tuple[list[ir_measures.Qrel], list[ir_measures.ScoredDoc]]:
    """``([Qrel(query_id, doc_id, relevance)], [ScoredDoc(query_id, doc_id, score)])``, the run's
    documents listed best first under the kit's tie rule."""
    run = checked(run, collection, protocol)
    judged = judgments(collection, protocol, run)
    if not judged:
        raise DataError("run", f"none of its queries is judged in {collection.name}; check the query ids")
    qrels = [ir_measures.Qrel(qid, doc, grade) for qid, grades in judged.items() for doc, grade in grades.items()]
    scores = ranked_scores({qid: run[qid] for qid in judged}, keep_scores)
    scored = [ir_measures.ScoredDoc(qid, doc, docs[doc]) for qid, docs in scores.items() for doc in ranked(docs)]
    return qrels, scored
