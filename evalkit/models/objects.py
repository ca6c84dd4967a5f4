"""A user's Python model object as the kit's `Scorer`, so it ranks through the one runner.

Accepted objects (`as_scorer`):

- a `Scorer` of the kit (``score``, ``prepare`` and ``describe``): used as it is;
- an object with mteb's ``encode(inputs, *, task_metadata, hf_split, hf_subset, prompt_type)``
  (``inputs`` a torch DataLoader of ``{"text": [...]}`` batches; ``prompt_type`` mteb's
  ``PromptType`` query / document when mteb is installed, else those strings; no mteb task
  exists for the kit's collections, so ``task_metadata`` is None);
- an object with a plain ``encode(list[str]) -> array`` (a `SentenceTransformer`, or your own);
- a ``score(query, documents)`` callable: `query` a `evalkit.collection.Query` (``.text``,
  ``.instruction``), `documents` a list of `evalkit.collection.Document` (``.doc_id``,
  ``.title``, ``.text``); it returns ``{doc_id: score}`` or one score per document, in order.

Encoders become a `evalkit.models.dense.BiEncoder` (its query, document and instruction-free
templates; cosine similarity of the vectors, normalised here), their vectors cached under the
model's identity (`evalkit.models.identity`) like any other model's; without an identity,
vectors are kept in memory for one run only.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import numpy as np

from evalkit.collection import Document, Query
from evalkit.errors import KitError

MTEB_KEYWORDS = ("task_metadata", "prompt_type")
DOCUMENT, QUERY = "document", "query"


def is_scorer(obj) -> bool:
    return all(callable(getattr(obj, name, None)) for name in ("score", "prepare", "describe"))


def is_mteb_encoder(obj) -> bool:
    try:
        parameters = inspect.signature(obj.encode).parameters
    except (TypeError, ValueError):
        return False
    return all(name in parameters for name in MTEB_KEYWORDS)


class ObjectEncoder:
    """A user's encoder behind the `Encoder` interface `BiEncoder` reads (``encode(texts, kind)``,
    ``location``, ``revision``), with vectors cached under `identity` (None: memory only)."""

    def __init__(self, model, name: str, identity: dict | None, batch_size: int = 32):
        from evalkit.embeddings import CachedVectors

        self.model = model
        self.location = name
        self.revision = None
        self.batch_size = batch_size
        self.mteb = is_mteb_encoder(model)
        self.vectors = None if identity is None else CachedVectors({"user_model": name, "identity": identity,
                                                                     "interface": "mteb" if self.mteb else "plain"})
        self._memory: dict[tuple[str, str], np.ndarray] = {}

    def _call(self, texts: list[str], kind: str) -> np.ndarray:
        if self.mteb:
            from torch.utils.data import DataLoader

            loader = DataLoader([{"text": t} for t in texts], batch_size=self.batch_size)
            try:
                from mteb.types import PromptType

                prompt = PromptType.query if kind == QUERY else PromptType.document
            except ImportError:  # mteb is not a dependency: its PromptType values
                prompt = kind
            out = self.model.encode(loader, task_metadata=None, hf_split="test", hf_subset="default",
                                    prompt_type=prompt)
        else:
            out = self.model.encode(texts)
        vectors = np.asarray(out.detach().cpu().numpy() if hasattr(out, "detach") else out, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise KitError(f"model {self.location}: encode gave an array of shape {vectors.shape} for {len(texts)} "
                           "texts; it must return one vector per text")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.isfinite(vectors).all() or (norms == 0).any():
            raise KitError(f"model {self.location}: encode gave a zero or non-finite vector; check the model")
        return vectors / norms

    def encode(self, texts: Sequence[str], desc: str = "texts") -> np.ndarray:
        kind = QUERY if desc == "queries" else DOCUMENT
        if self.vectors is not None:
            return self.vectors.stack([(kind, t) for t in texts], lambda item: list(item),
                                      lambda items: list(self._call([t for _, t in items], kind)),
                                      f"encoding {desc} ({self.location})")
        todo = list(dict.fromkeys(t for t in texts if (kind, t) not in self._memory))
        if todo:
            self._memory.update({(kind, t): v for t, v in zip(todo, self._call(todo, kind))})
        return np.stack([self._memory[(kind, t)] for t in texts]) if texts else np.zeros((0, 0), np.float32)


class CallableScorer:
    """A ``score(query, documents)`` callable as a `Scorer`."""

    reads_instruction = True

    def __init__(self, function, name: str):
        self.function = function
        self.name = name

    def prepare(self, documents: Sequence[Document]) -> None:
        """Nothing to prepare: the callable sees each query's candidates."""

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        out = self.function(query, list(candidates))
        ids = [d.doc_id for d in candidates]
        if isinstance(out, dict):
            missing = next((d for d in ids if d not in out), None)
            if missing is not None:
                raise KitError(f"model {self.name}: score() gave no score for document {missing} of query "
                               f"{query.qid}; score every document it is given")
            values = [out[d] for d in ids]
        else:
            values = list(np.asarray(out, dtype=float).reshape(-1)) if out is not None else []
            if len(values) != len(ids):
                raise KitError(f"model {self.name}: score() gave {len(values)} scores for {len(ids)} documents of "
                               f"query {query.qid}; return one score per document or a {{doc_id: score}} dict")
        scores = {}
        for doc, value in zip(ids, values):
            try:
                scores[doc] = float(value)
            except (TypeError, ValueError):
                raise KitError(f"model {self.name}: score() gave {value!r} for document {doc}; scores are numbers"
                               ) from None
            if not math.isfinite(scores[doc]):
                raise KitError(f"model {self.name}: score() gave a non-finite score for document {doc} of query "
                               f"{query.qid}; scores must be finite")
        return scores

    def describe(self) -> dict:
        return {"family": "python", "interface": "score(query, documents)", "model": self.name}


def as_scorer(obj, name: str, identity: dict | None, templates: dict):
    """The `Scorer` of a user's model object (see the module docstring)."""
    from evalkit.models.dense import BiEncoder

    if is_scorer(obj):
        return obj
    if callable(getattr(obj, "encode", None)):
        encoder = ObjectEncoder(obj, name, identity)
        model = BiEncoder(encoder, templates.get("query_template", "{query}"), templates.get("doc_template", "{text}"),
                          templates.get("empty_instruction_template", "{query}"))
        return model
    if callable(obj):
        return CallableScorer(obj, name)
    raise KitError(f"model {name}: {type(obj).__name__} has neither encode() nor score(); give a "
                   "SentenceTransformer, an object with encode(), a score(query, documents) callable or a Scorer")
