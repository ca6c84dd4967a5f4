"""Runs and judgments as ranx objects: `to_ranx(run, collection)` gives ``(ranx.Qrels, ranx.Run)``.

The qrels are the judgments the kit scores against under the protocol
(`evalkit.integrations.library_input.judgments`), for the queries the run ranks (the kit scores
a run on the queries it ranks; ranx wants the same query set on both sides); the run carries
strictly decreasing scores along the kit's ranking, so ranx ranks as the kit does whatever its
tie rule. `ranx_metric` names the ranx metric that equals a kit measure: binary measures carry
the collection's relevance level as ranx's ``-lN`` suffix (CSFCube: ``map-l2``, since CSFCube
counts grade >= 2 as relevant); ``nDCG@k`` is ranx's ``ndcg@k`` (gain = grade, 1/log2(rank + 1),
ideal from every judged document, as trec_eval). The kit's own measures (``nDCG_csfcube@k``,
``MAP_csfcube``, p-MRR) have no ranx metric. Tested: ranx's figures equal the kit's
(tests/integrations/test_integrations_runs.py).

`from_evaluation(result, variant)` does the same for a run of `evalkit.evaluate`
(``result.to_ranx()``). `ranx_metrics(measures, collection)` names a list of kit measures as
ranx metrics. Each takes what the API's `evaluate` takes for the same thing (``protocol``,
``seeds`` or ``queries``, ``measures``, ``variant``), checked by the same rules: an
`evalkit.evaluation.request.EvaluationRequest` (`evalkit.integrations.library_input.checked`).
"""

from __future__ import annotations

from collections.abc import Sequence

import ranx

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import BASE, Collection
from evalkit.data.runs import Run
from evalkit.datasets import load_dataset  # the dataset layer: loaded only when a result is converted
from evalkit.evaluation import measures
from evalkit.evaluation.evaluate import parsed_measure
from evalkit.evaluation.request import EvaluationRequest
from evalkit.integrations.library_input import checked, checked_request, judgments, library_request, ranked_scores


def ranx_metric(measure: str, relevance_level: int) -> str:
    """The ranx metric name equal to the kit's `measure` (``nDCG@20`` -> ``ndcg@20``, ``AP`` -> ``map-l2``),
    read from the measure's declaration (`MeasureSpec.ranx`, its ``binary``); the name checked by
    the request's measure rule (`evalkit.evaluation.evaluate.parsed_measure`), one line where ranx has none."""
    EvaluationRequest(measures=[measure])  # the request's rule of a measure name
    parsed = parsed_measure(measure, relevance_level)
    if parsed.spec.ranx is None:
        equal = ", ".join(s.help for s in measures.declarations() if s.ranx is not None)
        raise RequestError("measures", f"{measure} has no ranx equivalent; use {equal}")
    name = parsed.spec.ranx + (f"@{parsed.cutoff}" if parsed.cutoff else "")
    return f"{name}-l{relevance_level}" if parsed.spec.binary else name


def ranx_metrics(measures: Sequence[str], collection: Collection, protocol: str = "pool") -> dict[str, str]:
    """{kit measure: ranx metric} of `measures` on `collection`: the request's measures (a list,
    none twice, each parsed against the collection: `check_request`, as every front end's), each
    named as ranx names it (`ranx_metric`); for ``ranx.evaluate(qrels, run, list(metrics.values()))``."""
    names = checked_request(library_request(collection, protocol, measures=measures), collection).names
    return {name: ranx_metric(name, collection.relevance_level) for name in names}


def to_ranx(run: Run, collection: Collection, protocol: str = "pool", name: str = "run",
            keep_scores: bool = False, *, seeds: Sequence[str] | None = None,
            queries: Sequence[str] | None = None) -> tuple[ranx.Qrels, ranx.Run]:
    """``(ranx.Qrels, ranx.Run)`` of `run` on `collection` under `protocol` (module docstring), on
    the queries of `seeds` or `queries` where given (`evalkit.data.collection.select_queries`)."""
    run, _ = checked(run, collection, protocol, seeds=seeds, queries=queries)
    qrels = judgments(collection, protocol, run)
    if not qrels:
        raise DataError("run", f"none of its queries is judged in {collection.name}; check the query ids")
    scores = ranked_scores({qid: run[qid] for qid in qrels}, keep_scores)
    return ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(scores, name=name)


def from_evaluation(result, variant: str = BASE) -> tuple[ranx.Qrels, ranx.Run]:
    """``(ranx.Qrels, ranx.Run)`` of the run an `evalkit.api.Evaluation` made of `variant`
    (`Evaluation.run_of`: the run it scored, not what its run-store folder holds now, which a later
    evaluation of the same name may have replaced), under the evaluation's protocol."""
    if not isinstance(variant, str) or variant not in result.runs:
        raise RequestError("variant", f"this result has {', '.join(result.runs)}", value=variant)  # as compare_table
    collection = load_dataset(result.settings["dataset"])
    run = result.run_of(variant)
    return to_ranx(run, collection, result.settings["protocol"], name=f"{result.name}--{variant}")
