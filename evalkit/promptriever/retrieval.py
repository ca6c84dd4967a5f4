"""Dense retrieval and reranking with the kit's embedding models on the recipe's datasets.

The query string is the model's own template (``query_template`` with ``{instruction}``
and ``{query}``); a generic prompt is appended to the query text by `with_prompt`.
Documents are ``title + " " + text`` through the model's ``doc_template``, encoded once
per model through the embedding cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import faiss
import numpy as np

from evalkit.models.dense import BiEncoder
from evalkit.promptriever.prompts import with_prompt
from evalkit.runs import Run


def _doc_text(doc: Mapping[str, str]) -> str:
    return f"{doc.get('title', '')} {doc.get('text', '')}".strip()


def query_vectors(model: BiEncoder, queries: Mapping[str, str], prompt: str | None = None) -> np.ndarray:
    """Query texts (instructions already appended, as the datasets' `text()`) through the template."""
    texts = [model.query_template.format(instruction="", query=with_prompt(text, prompt)) for text in queries.values()]
    return model.encoder.encode(texts, "queries")


def retrieve(model: BiEncoder, corpus: Mapping[str, Mapping[str, str]], queries: Mapping[str, str],
             prompt: str | None = None, depth: int = 1000) -> Run:
    """Exact inner-product search of the whole corpus: the top `depth` per query."""
    ids = list(corpus)
    docs = model.encoder.encode([model.doc_template.format(text=_doc_text(corpus[d])) for d in ids], "documents")
    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(np.ascontiguousarray(docs, dtype=np.float32))
    scores, rows = index.search(np.ascontiguousarray(query_vectors(model, queries, prompt), dtype=np.float32),
                                min(depth, len(ids)))
    return {qid: {ids[r]: float(s) for s, r in zip(scores[i], rows[i]) if r >= 0}
            for i, qid in enumerate(queries)}


def rerank(model: BiEncoder, corpus: Mapping[str, Mapping[str, str]], queries: Mapping[str, str],
           candidates: Mapping[str, Sequence[str]], prompt: str | None = None) -> Run:
    """Score each query's given candidates (FollowIR's pools)."""
    vectors = query_vectors(model, queries, prompt)
    run = {}
    for i, qid in enumerate(queries):
        docs = list(candidates.get(qid, ()))
        matrix = model.encoder.encode([model.doc_template.format(text=_doc_text(corpus[d])) for d in docs])
        run[qid] = {d: float(s) for d, s in zip(docs, matrix @ vectors[i])} if docs else {}
    return run
