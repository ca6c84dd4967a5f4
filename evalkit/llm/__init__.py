"""LLM rerankers: pointwise and pairwise (PRP) judgments from local or API language models."""

from evalkit.llm.reranker import LLMReranker, order_scores

__all__ = ["LLMReranker", "order_scores"]
