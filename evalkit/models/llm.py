"""LLM rerankers as kit scorers (a first-stage model orders the candidates, the LLM reranks its
top), and the PRP oracle built from a collection's grades, their upper bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evalkit.core.errors import DataError
from evalkit.data.collection import Document, Query
from evalkit.data.runs import ranked
from evalkit.llm.oracle import oracle
from evalkit.llm.reranker import VARIANTS, LLMReranker, order_scores
from evalkit.models.base import Scorer, index_documents


class LLMScorer:
    """`LLMReranker` behind the `Scorer` interface.

    The prompt carries the query's instruction and text (on CSFCube the whole seed, or its
    facet sentences for the Aspect-subset variant) and each candidate's title and body.
    """

    reads_instruction = True

    def __init__(self, reranker: LLMReranker, first_stage: Scorer):
        self.reranker = reranker
        self.first_stage = first_stage

    def prepare(self, documents: Sequence[Document]) -> None:
        self.first_stage.prepare(documents)

    def index_documents(self, corpus, executor=None) -> None:
        index_documents(self.first_stage, corpus, executor)

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        first = self.first_stage.score(query, candidates)
        texts = [(d.doc_id, d.full_text) for d in candidates]
        return self.reranker.rerank(query.instruction, query.text, texts, first)

    def score_many(self, queries: Sequence[Query], candidates: Sequence[Sequence[Document]]) -> list[dict[str, float]]:
        """`score` of every query, the LLM judging many queries at once (same results as one by one)."""
        jobs = []
        for query, docs in zip(queries, candidates):
            first = self.first_stage.score(query, docs)
            jobs.append((query.instruction, query.text, [(d.doc_id, d.full_text) for d in docs], first))
        return self.reranker.rerank_many(jobs)

    def accounting(self) -> dict:
        return self.reranker.accounting()

    def use_workers(self, workers: int, placement: str = "local") -> None:
        """The LLM's kit-started vLLM server as `workers` replicas (`LLMReranker.use_workers`)."""
        self.reranker.use_workers(workers, placement)

    def describe(self) -> dict:
        return {**self.reranker.describe(), "first_stage": self.first_stage.describe()}


class OraclePRP:
    """PRP with a perfect judge built from the collection's graded qrels of the query: the upper
    bound of reranking the first stage's top `depth` with PRP."""

    reads_instruction = True

    def __init__(self, first_stage: Scorer, qrels: Mapping[str, Mapping[str, int]], variant: str = "heapsort",
                 k: int = 20, depth: int = 200):
        if variant not in VARIANTS:
            raise DataError("model settings",
                            f"variant {variant!r} is not one of {sorted(VARIANTS)}; fix the model settings")
        self.first_stage, self.qrels = first_stage, qrels
        self.variant, self.k, self.depth = variant, int(k), int(depth)

    def prepare(self, documents: Sequence[Document]) -> None:
        self.first_stage.prepare(documents)

    def index_documents(self, corpus, executor=None) -> None:
        index_documents(self.first_stage, corpus, executor)

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        grades = self.qrels.get(query.qid)
        if grades is None:
            raise DataError("collection", f"the oracle has no grades for query {query.qid}; it needs a judged query")
        order = ranked(self.first_stage.score(query, candidates))
        top = VARIANTS[self.variant](order[:self.depth], oracle(grades), self.k)[:self.k]
        chosen = set(top)
        return order_scores(top + [doc for doc in order if doc not in chosen])

    def describe(self) -> dict:
        return {"family": "oracle", "variant": self.variant, "k": self.k, "depth": self.depth,
                "first_stage": self.first_stage.describe()}
