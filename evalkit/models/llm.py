"""LLM rerankers as kit scorers (a first-stage model orders the candidates, the LLM reranks its
top), and the PRP oracle built from the grades, their upper bound."""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.csfcube import CSFCube, Paper
from evalkit.errors import KitError
from evalkit.instructions import Request
from evalkit.llm.oracle import oracle
from evalkit.llm.reranker import VARIANTS, LLMReranker, order_scores
from evalkit.models.base import Scorer
from evalkit.runs import ranked


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


class OraclePRP:
    """PRP with a perfect judge built from CSFCube's adjudicated grades of the request's
    (seed, facet): the upper bound of reranking the first stage's top `depth` with PRP."""

    reads_instruction = True

    def __init__(self, first_stage: Scorer, data: CSFCube, variant: str = "heapsort", k: int = 20,
                 depth: int = 200):
        if variant not in VARIANTS:
            raise KitError(f"variant {variant!r} is not one of {sorted(VARIANTS)}; fix the model settings")
        self.first_stage, self.data = first_stage, data
        self.variant, self.k, self.depth = variant, int(k), int(depth)

    def prepare(self, papers: Sequence[Paper]) -> None:
        self.first_stage.prepare(papers)

    def score(self, request: Request, candidates: Sequence[Paper]) -> dict[str, float]:
        query = self.data.queries.get(f"{request.seed.pid}_{request.facet}")
        if query is None:
            raise KitError(f"the oracle has no grades for seed {request.seed.pid} and facet {request.facet}")
        order = ranked(self.first_stage.score(request, candidates))
        top = VARIANTS[self.variant](order[:self.depth], oracle(query.grades), self.k)[:self.k]
        chosen = set(top)
        return order_scores(top + [doc for doc in order if doc not in chosen])

    def describe(self) -> dict:
        return {"family": "oracle", "variant": self.variant, "k": self.k, "depth": self.depth,
                "first_stage": self.first_stage.describe()}
