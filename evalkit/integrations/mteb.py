"""CSFCube as mteb tasks: `csfcube_tasks()` for ``mteb.evaluate(model, tasks=csfcube_tasks())``.

Two task objects, both mteb's top-ranked (reranking) retrieval setting: each query reranks its
judged pool (mteb's ``top_ranked``), nothing else.

- ``CSFCubeFacetReranking`` (type ``Reranking``, main score ``ndcg_at_20``): every query of the
  collection (50, or those of ``seeds=``): the query is the seed paper's title and abstract, its
  ``instruction`` the facet's (Background / Method / Result) instruction of the variant
  (default ``base``); documents are title + abstract. mteb shows a model the query text followed
  by one space and the instruction, the documents as title, space, abstract: the kit's
  ``query_template="{query} {instruction}"`` with its default document template.
- ``CSFCubeFacetInstructionPairs`` (type ``InstructionReranking``, main score ``p-MRR``): for
  each seed annotated for two facets and each direction, FollowIR's instance pair ``Q-og`` (the
  query under its own facet's instruction, its pool and grades) and ``Q-changed`` (the same
  seed under the other facet's instruction, that facet's pool and grades), with the documents
  whose relevance changes (grade >= 2 under Q, below 2 under the other facet:
  `evalkit.evaluation.measures.changed_documents`); mteb's FollowIR scorer
  (``evaluate_p_mrr_change``) gives p-MRR, with ``og`` / ``changed`` scores beside it.

Which of the kit's settings this is: the protocol ``pool`` by default (each seed excluded from
its candidates and its judgments, `evalkit.data.collection.Collection.judged`), or ``released``
(pools and judgments as released). mteb scores with pytrec_eval, so its ``ndcg_at_20`` is the
kit's ``nDCG@20`` (trec_eval's discount 1/log2(rank + 1), ideal DCG from every judged document),
not the CSFCube study's default ``nDCG_csfcube@20`` (the official script's discount, ranks 1
and 2 weigh 1, ideal from the ranked documents); mteb averages over all queries (the kit's
``aggregate="mean"``), not the mean of the two test folds. Its p-MRR is the plain mean over the
directed pairs of each pair's p-MRR, which is the kit's per-query p-MRR averaged over the pairs
(the kit's tables report the mean of the facet means). mteb's binary measures (MAP, recall,
precision, MRR) count every grade >= 1 as relevant, CSFCube's threshold is 2: they are not the
kit's ``AP``, ``R@k``, ``P@k``, ``RR``. Tie rule: mteb (pytrec_eval, and its p-MRR since
2.19.5) ranks tied scores by document id descending, the kit ascending, so the tasks hand mteb
each query's scores as n, ..., 1 along the kit's ranking (`KitOrder`), after the kit's check of a
run a library is handed (a ranking for every query, finite scores: one line otherwise); with
tied scores or without, the figures are equal (tests/integrations/test_integrations_mteb.py checks
both with a tiny local sentence-transformer).

Each task's name carries the protocol, the variant and a digest of its content, since mteb keys its
result cache by task name. mteb is imported when this module is imported, never by ``import evalkit``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from datasets import Dataset
from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change  # FollowIR's scorer, as mteb's own tasks use it
from mteb.abstasks import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.models import (
    CrossEncoderProtocol,
    EncoderProtocol,
    SearchCrossEncoderWrapper,
    SearchEncoderWrapper,
    SearchProtocol,
)

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import BASE, Collection, select_variant
from evalkit.data.protocols import POOL_PROTOCOLS, protocol_collection
from evalkit.datasets import load_dataset  # the dataset layer, loaded when no collection is given
from evalkit.evaluation.measures import PMRR, changed_documents
from evalkit.evaluation.request import EvaluationRequest, check_options, check_request
from evalkit.integrations.library_input import check_shape, ranked_scores

SPLIT = "test"
MEASURES = ("nDCG@20", PMRR)  # what the tasks' main scores are in the kit's terms (module docstring)
CITATION = r"""
@inproceedings{mysore2021csfcube,
  title = {CSFCube - A Test Collection of Computer Science Research Articles for Faceted Query by Example},
  author = {Sheshera Mysore and Tim O'Gorman and Andrew McCallum and Hamed Zamani},
  booktitle = {NeurIPS Datasets and Benchmarks Track},
  year = {2021},
}
"""


def _metadata(name: str, kind: str, main_score: str, description: str, revision: str) -> TaskMetadata:
    return TaskMetadata(
        name=name, description=description, reference="https://github.com/iesl/CSFCube",
        dataset={"path": "evalkit/csfcube", "revision": revision or "local"},
        type=kind, category="t2t", modalities=["text"], eval_splits=[SPLIT], eval_langs=["eng-Latn"],
        main_score=main_score, date=("2021-01-01", "2021-06-01"), domains=["Academic", "Written"],
        task_subtypes=[], license="cc-by-nc-4.0", annotations_creators="expert-annotated", dialect=[],
        sample_creation="found", bibtex_citation=CITATION)


def content_digest(split_data: dict) -> str:
    """8 hex digits of everything a task's scores depend on (queries with their instructions,
    pools, judgments, changed documents, the corpus texts)."""
    return hashlib.sha256(json.dumps(split_data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:8]


class _CSFCubeTask(AbsTaskRetrieval):
    """A task whose data is built from a kit `Collection` in memory (nothing is downloaded).

    Each instance's name is the class's plus the protocol, the variant and `content_digest`
    (e.g. ``CSFCubeFacetReranking-pool-base-1a2b3c4d``): mteb keys its result cache by task
    name, so a result of other settings or other data is never returned for these."""

    k_values = (1, 3, 5, 10, 20, 100, 1000)

    def __init__(self, split_data: dict, settings: str, revision: str, **kwargs: Any) -> None:
        base = type(self).metadata
        self.metadata = base.model_copy(update={
            "name": f"{base.name}-{settings}-{content_digest(split_data)}",
            "dataset": {"path": "evalkit/csfcube", "revision": revision or "local"}})
        super().__init__(**kwargs)
        self._split_data = split_data

    def _evaluate_subset(self, model: Any, data_split: Any, **kwargs: Any) -> Any:
        """mteb's evaluation of `model`, its search wrapped in `KitOrder` (mteb's own dispatch first:
        an encoder or a cross-encoder searches through mteb's wrapper; anything else as mteb takes it)."""
        if isinstance(model, EncoderProtocol) and not isinstance(model, SearchProtocol):
            model = SearchEncoderWrapper(model)
        elif isinstance(model, CrossEncoderProtocol):
            model = SearchCrossEncoderWrapper(model)
        return super()._evaluate_subset(KitOrder(model), data_split, **kwargs)

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        data = self._split_data
        self.dataset = {"default": {SPLIT: {
            "corpus": Dataset.from_list(data["corpus"]),
            "queries": Dataset.from_list(data["queries"]),
            "relevant_docs": {q: dict(g) for q, g in data["relevant_docs"].items()},
            "top_ranked": {q: list(d) for q, d in data["top_ranked"].items()},
        }}}
        self.data_loaded = True


class KitOrder:
    """A search model whose results mteb scores as the kit ranks them: a ranking for every query,
    held to the rule of every run a library is handed (`evalkit.integrations.library_input.check_shape`:
    finite scores; one line otherwise), each query's scores replaced by n, ..., 1 along the kit's
    tie rule (`library_input.ranked_scores`), so mteb's own (pytrec_eval's: document id descending)
    never applies and its figures on tied scores are the kit's."""

    def __init__(self, model: Any) -> None:
        self.model = model

    @property
    def mteb_model_meta(self) -> Any:
        return self.model.mteb_model_meta

    def index(self, corpus: Any, **kwargs: Any) -> None:
        return self.model.index(corpus, **kwargs)

    def search(self, queries: Any, **kwargs: Any) -> dict[str, dict[str, float]]:
        found = self.model.search(queries, **kwargs)
        missing = next((str(q) for q in queries["id"] if q not in found), None)
        if missing is not None:
            raise DataError("run", f"the model gave no ranking for query {missing}; rank every query")
        check_shape(found)
        return ranked_scores(found)


class CSFCubeFacetReranking(_CSFCubeTask):
    """Every CSFCube query reranks its judged pool under its facet instruction (module docstring)."""

    metadata = _metadata(
        "CSFCubeFacetReranking", "Reranking", "ndcg_at_20",
        "CSFCube faceted query by example: a seed paper and a facet instruction (background, method, result) "
        "rerank the expert-judged pool of candidate computer-science papers.", "")


class CSFCubeFacetInstructionPairs(_CSFCubeTask):
    """CSFCube's instruction pairs (a seed under its two annotated facets) scored by p-MRR (module docstring)."""

    metadata = _metadata(
        "CSFCubeFacetInstructionPairs", "InstructionReranking", "p-MRR",
        "CSFCube seeds annotated for two facets: the ranking under one facet's instruction against the ranking "
        "under the other's, scored by FollowIR's p-MRR over the papers whose relevance changes.", "")

    def task_specific_scores(self, scores: dict, qrels: dict, results: dict, hf_split: str,
                             hf_subset: str) -> dict[str, float]:
        return evaluate_p_mrr_change(qrels, results, self._split_data["changed"], self.k_values)


def _document(collection: Collection, doc_id: str) -> dict[str, str]:
    doc = collection.documents[doc_id]
    return {"id": doc_id, "title": doc.title, "text": doc.text}


def _query(collection: Collection, qid: str, variant: str, instance: str) -> dict[str, str | None]:
    query = collection.query(qid, variant)
    return {"id": instance, "text": query.text, "instruction": query.instruction.strip() or None}


def _pool(collection: Collection, qid: str) -> list[str]:
    return [d.doc_id for d in collection.candidates_of(qid)]


def csfcube_tasks(collection: Collection | None = None, *, protocol: str = "pool", variant: str = BASE,
                  seeds: Sequence[str] | None = None) -> list[AbsTaskRetrieval]:
    """``[CSFCubeFacetReranking, CSFCubeFacetInstructionPairs]`` task objects for ``mteb.evaluate``.

    `collection`: the CSFCube collection (default: `evalkit.datasets.load_dataset("csfcube")`, the
    verified release); `protocol`: ``pool`` (default) or ``released``; `variant`: the instruction
    variant (``base``, or one of the collection's variants); `seeds`: only the queries of these
    seed papers (a quick look). The pairs task is left out when the chosen queries hold no
    instruction pair. Each task's name carries the settings and a digest of its content
    (`_CSFCubeTask`). See the module docstring for what mteb's scores are in the kit's terms.

    The arguments are an `evalkit.evaluation.request.EvaluationRequest` (the protocol, the seeds,
    the measures the tasks score: `MEASURES`), checked by the rules every front end's request
    follows; the variant by `evalkit.data.collection.select_variants`.
    """
    request = EvaluationRequest(dataset="csfcube", protocol=protocol, measures=MEASURES, aggregate="mean",
                                seeds=seeds)
    check_options(request)  # the request's rules, before any data is loaded
    if protocol not in POOL_PROTOCOLS:
        raise RequestError("protocol", f"the mteb tasks rerank the judged pools; choose {' or '.join(POOL_PROTOCOLS)}",
                           value=protocol)
    if collection is None:
        collection = load_dataset("csfcube")
    if not isinstance(collection, Collection):
        raise RequestError("collection", "give a kit Collection (evalkit.datasets.load_dataset('csfcube')) or leave it "
                           "out", value=type(collection).__name__)
    if not collection.candidates or not any(q.facet for q in collection.queries.values()):
        raise DataError(collection.name, "the mteb tasks need CSFCube (judged pools and facet queries)")
    select_variant(collection, variant)
    chosen = check_request(request, collection).queries  # the measures and the seeds, as every front end's
    collection = protocol_collection(collection if chosen is None else collection.select(list(chosen)), protocol)
    judged = collection.judged
    qids = list(collection.queries)
    docs = sorted({d for q in qids for d in _pool(collection, q)})
    reranking = {
        "corpus": [_document(collection, d) for d in docs],
        "queries": [_query(collection, q, variant, q) for q in qids],
        "relevant_docs": {q: dict(judged[q]) for q in qids},
        "top_ranked": {q: _pool(collection, q) for q in qids},
    }
    settings, revision = f"{protocol}-{variant}", collection.identity[:12]
    tasks: list[AbsTaskRetrieval] = [CSFCubeFacetReranking(reranking, settings, revision)]
    if collection.pairs:
        queries, relevant, top_ranked, changed = [], {}, {}, {}
        for qid, other in collection.pairs.items():
            for suffix, source in (("og", qid), ("changed", other)):
                instance = f"{qid}-{suffix}"
                queries.append(_query(collection, source, variant, instance))
                relevant[instance] = dict(judged[source])
                top_ranked[instance] = _pool(collection, source)
            changed[qid] = sorted(changed_documents(judged[qid], judged[other], collection.relevance_level))
        pair_docs = sorted({d for pool in top_ranked.values() for d in pool})
        tasks.append(CSFCubeFacetInstructionPairs({
            "corpus": [_document(collection, d) for d in pair_docs], "queries": queries,
            "relevant_docs": relevant, "top_ranked": top_ranked, "changed": changed}, settings, revision))
    return tasks
