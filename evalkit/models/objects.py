"""A user's Python model object as the kit's `Scorer`, so it ranks through the one runner.

Accepted objects (`as_scorer`):

- a `Scorer` of the kit (``score``, ``prepare`` and ``describe``): used as it is;
- an object with mteb's ``encode(inputs, *, task_metadata, hf_split, hf_subset, prompt_type)``
  (``inputs`` a torch DataLoader of ``{"text": [...]}`` batches; ``prompt_type`` mteb's
  ``PromptType`` query / document when mteb is installed, else those strings; no mteb task
  exists for the kit's collections, so ``task_metadata`` is None);
- an object with a plain ``encode(list[str]) -> array`` (a `SentenceTransformer`, or your own);
- a ``score(query, documents)`` callable: `query` a `evalkit.data.collection.Query` (``.text``,
  ``.instruction``), `documents` a list of `evalkit.data.collection.Document` (``.doc_id``,
  ``.title``, ``.text``); it returns ``{doc_id: score}`` or one score per document, in order.

Encoders become a `evalkit.models.dense.BiEncoder` (its query, document and instruction-free
templates; cosine similarity of the vectors, normalised here), their vectors cached under the
model's identity (`evalkit.models.identity`) like any other model's, not under its name: the same
object registered under another name encodes nothing again (`vectors_key`); without an identity,
vectors are kept in memory for one run only.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Sequence

import numpy as np

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Document, Query
from evalkit.models.dense import BiEncoder
from evalkit.models.identity import vectors_identity
from evalkit.retrieval.embeddings import CachedVectors

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


def prepare_object(model) -> None:
    """A torch module is put in eval mode before it is fingerprinted and encodes (as
    sentence-transformers' and mteb's encode do): dropout off, and one identity for the object
    whether or not it has encoded yet."""
    eval_mode = getattr(model, "eval", None)
    if callable(eval_mode) and type(model).__module__ != "builtins":
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a core dependency
            return
        if isinstance(model, torch.nn.Module):
            model.eval()


def as_vectors(out, n: int, where: str) -> np.ndarray:
    """A user encoder's output as an (n, dim) float32 array, or one KitError line saying what it
    gave: a torch tensor, a numpy array or a list of equal-length lists of real numbers."""
    if hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    if isinstance(out, dict) or not isinstance(out, (np.ndarray, list, tuple)):
        raise DataError(where, f"encode gave a {type(out).__name__}; return one vector per text (an array of "
                        f"shape (texts, dim), a tensor or a list of lists of numbers)")
    if isinstance(out, (list, tuple)):
        lengths = {len(v) if isinstance(v, (list, tuple, np.ndarray)) or hasattr(v, "shape") else None for v in out}
        if len(lengths) > 1 or None in lengths:
            raise DataError(where, f"encode gave vectors of different lengths ({sorted(lengths, key=str)[:4]}); "
                            "every vector must have the same dimension")
        try:
            out = np.array([v.detach().cpu().numpy() if hasattr(v, "detach") else v for v in out])
        except (TypeError, ValueError) as exc:
            raise DataError(where, f"encode gave vectors numpy cannot read ({exc}); return real numbers") from None
    kind = out.dtype.kind
    if kind == "c":
        raise DataError(where, f"encode gave complex vectors ({out.dtype}); the kit ranks by cosine of real "
                        "vectors and does not drop imaginary parts: return real vectors")
    if kind not in "fiub":
        raise DataError(where, f"encode gave an array of {out.dtype} values, not numbers; return real vectors")
    with np.errstate(over="ignore", invalid="ignore"):
        vectors = out.astype(np.float32)
    if vectors.ndim != 2 or len(vectors) != n:
        raise DataError(where, f"encode gave an array of shape {vectors.shape} for {n} texts; it must return one "
                        "vector per text")
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    if not np.isfinite(vectors).all() or (norms == 0).any():
        raise DataError(where, "encode gave a zero or non-finite vector (or one beyond float32); check the model")
    return (vectors / norms).astype(np.float32)


def vectors_key(name: str, identity: dict | None, interface: str) -> dict | None:
    """What a user encoder's cached vectors (and its corpus index) are keyed by: what makes them,
    never the name it is registered under. With a fingerprint of the object
    (`evalkit.models.identity.vectors_identity`), that fingerprint and the interface it is called
    through: the same object under a new name, or registered again with other query templates,
    encodes no document twice. A revision alone (the walk could not see everything) is the user's
    statement about the model of that name, so the name stays in the key; no identity: None (memory
    only)."""
    keyed = vectors_identity(identity)
    if keyed is None:
        return None
    return {"identity": keyed, "interface": interface,
            **({} if "fingerprint_sha256" in keyed else {"user_model": name})}


class ObjectEncoder:
    """A user's encoder behind the `Encoder` interface `BiEncoder` reads (``encode(texts, kind)``,
    ``location``, ``revision``, ``fingerprint``), with vectors cached under `vectors_key` (None:
    memory only, no corpus index; the fingerprint is then None)."""

    def __init__(self, model, name: str, identity: dict | None, batch_size: int = 32):
        self.model = model
        self.location = name
        self.revision = None
        self.batch_size = batch_size
        self.mteb = is_mteb_encoder(model)
        keyed = vectors_key(name, identity, "mteb" if self.mteb else "plain")
        self.vectors = None if keyed is None else CachedVectors(keyed)
        self.fingerprint = None if self.vectors is None else self.vectors.fingerprint
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
        return as_vectors(out, len(texts), f"model {self.location}")

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


def as_score(value, where: str) -> float:
    """One score from a user's scorer as a finite float, or one KitError line: a bool, a string,
    a complex number, None or anything else that is not a real number is refused, not cast."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if hasattr(value, "detach") and getattr(value, "numel", lambda: 0)() == 1:
        value = value.detach().cpu().item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise DataError(where, f"is {value!r:.60}, a {type(value).__name__}; scores are real numbers")
    try:
        score = float(value)
    except OverflowError:
        raise DataError(where, f"is an integer of {len(str(abs(int(value))))} digits, beyond a float; scores must "
                        "be finite floats") from None
    if not math.isfinite(score):
        raise DataError(where, f"is {score}, a non-finite score; scores must be finite")
    return score


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
        where = f"model {self.name}: score() for query {query.qid}"
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
        if isinstance(out, dict):
            missing = next((d for d in ids if d not in out), None)
            if missing is not None:
                raise DataError(where, f"gave no score for document {missing}; score every document it is given")
            values = [out[d] for d in ids]
        elif isinstance(out, np.ndarray):
            values = list(out.reshape(-1)) if out.ndim <= 1 or out.size == out.shape[0] else None
            if values is None:
                raise DataError(where, f"gave an array of shape {out.shape}; return one score per document")
        elif isinstance(out, (list, tuple)):
            values = list(out)
        else:
            raise DataError(where, f"gave a {type(out).__name__}; return a list with one score per document (in "
                            "order) or a {doc_id: score} dict")
        if len(values) != len(ids):
            raise DataError(where, f"gave {len(values)} scores for {len(ids)} documents; return one score per "
                            "document or a {doc_id: score} dict")
        return {doc: as_score(value, f"{where}, document {doc},") for doc, value in zip(ids, values)}

    def describe(self) -> dict:
        return {"family": "python", "interface": "score(query, documents)", "model": self.name}


def as_scorer(obj, name: str, identity: dict | None, templates: dict):
    """The `Scorer` of a user's model object (see the module docstring)."""
    if is_scorer(obj):
        return obj
    if callable(getattr(obj, "encode", None)):
        encoder = ObjectEncoder(obj, name, identity)
        model = BiEncoder(encoder, templates.get("query_template", "{query}"), templates.get("doc_template", "{text}"),
                          templates.get("empty_instruction_template", "{query}"))
        return model
    if callable(obj):
        return CallableScorer(obj, name)
    raise RequestError("model", f"model {name}: {type(obj).__name__} has neither encode() nor score(); give a "
                       "SentenceTransformer, an object with encode(), a score(query, documents) callable or a Scorer")
