"""LLM rerankers as kit scorers: a first-stage model orders the candidates, the LLM reranks its top."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.csfcube import Paper
from evalkit.instructions import Request
from evalkit.llm.reranker import LLMReranker
from evalkit.models.base import Scorer


class LLMScorer:
    """`LLMReranker` behind the `Scorer` interface.

    The prompt carries the request's instruction and query text (the whole seed, or its
    facet sentences for the Aspect-subset variant) and each candidate's title and abstract.
    """

    reads_instruction = True

    def __init__(self, reranker: LLMReranker, first_stage: Scorer):
        self.reranker = reranker
        self.first_stage = first_stage

    def prepare(self, papers: Sequence[Paper]) -> None:
        self.first_stage.prepare(papers)

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        first = self.first_stage.score(request, candidates)
        texts = [(p.pid, p.text) for p in candidates]
        return self.reranker.rerank(request.instruction, request.query_text, texts, first)

    def accounting(self) -> dict:
        return self.reranker.accounting()

    def describe(self) -> dict:
        return {**self.reranker.describe(), "first_stage": self.first_stage.describe()}
