"""The ``llm`` family: an LLM reranker (pointwise or Pairwise Ranking Prompting, `evalkit.llm`)
over a first stage: the entry's ``first_stage``, else the profile's. A local causal LM through
transformers, or (``backend: openai``) an OpenAI-compatible server: an API model."""

from __future__ import annotations

from evalkit.data.collection import Collection
from evalkit.models.base import Scorer
from evalkit.models.family import ALWAYS, PROMPTS, Family


def build(settings: dict, profile: str, collection: Collection, first_stage: Scorer) -> Scorer:
    # lazy (start-up cost): a model family's modules load only when it is built
    from evalkit.llm.reranker import LLMReranker
    from evalkit.models.llm import LLMScorer

    return LLMScorer(LLMReranker(settings), first_stage)


def settings(entry: dict) -> tuple[str, ...]:
    """The reranker's settings and its backend's (`evalkit.llm.reranker.entry_settings`)."""
    from evalkit.llm.reranker import entry_settings  # lazy, as in `build`

    return entry_settings(entry)


FAMILY = Family("llm", build, weighted=True, first_stage=ALWAYS, work=PROMPTS, api_backends={"openai"},
                settings=settings)
