"""Collections with planted ties and the exhaustive reference ranking (whole-corpus retrieval
tests), and an encoder over a fake model (embedding-cache tests)."""

from __future__ import annotations

import numpy as np

from evalkit.data.collection import Collection, Document, Query
from evalkit.data.runs import ranked
from evalkit.models.dense import BiEncoder
from evalkit.retrieval.embeddings import Encoder


class TableEncoder:
    """An `Encoder` stand-in: each text's vector is looked up in a table (no model)."""

    def __init__(self, table: dict[str, np.ndarray], name: str):
        self.table, self.location, self.revision, self.name = table, name, "1", name
        self.fingerprint = f"table-{name}"
        self.calls = 0

    def encode(self, texts, desc: str = "texts") -> np.ndarray:
        self.calls += len(texts)
        return np.stack([self.table[t] for t in texts]).astype(np.float32) if texts else np.zeros((0, 1), np.float32)


class FakeModel:
    """A deterministic 'sentence-transformers' model: 8-dim vectors from the text's hash."""

    def __init__(self):
        self.calls = 0

    def encode(self, texts, **kwargs):
        self.calls += len(texts)
        out = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % 2**32)
            out.append(rng.standard_normal(8))
        return np.asarray(out, dtype=np.float32)


TEXTS = [f"text number {i}" for i in range(300)]


def encoder(tmp_path) -> Encoder:
    enc = Encoder("hub/fake-model", revision="r1", cache_dir=tmp_path / "cache")
    enc._model = FakeModel()
    return enc


def planted(kind: str, docs: int = 600, queries: int = 12, dim: int = 12, seed: int = 0):
    """(collection, vectors): integer vectors with few values (massive exact ties) or Gaussian ones."""
    rng = np.random.default_rng(seed)
    if kind == "ties":
        make = lambda n: rng.integers(0, 2, size=(n, dim)).astype(np.float32)  # noqa: E731
    else:
        make = lambda n: rng.standard_normal((n, dim)).astype(np.float32)  # noqa: E731
    doc_ids = [f"d{i:04d}" for i in rng.permutation(docs)]  # file order is not id order
    vectors = dict(zip(doc_ids, make(docs)))
    query_vectors = dict(zip([f"query {j}" for j in range(queries)], make(queries)))
    documents = {d: Document(d, "", d) for d in doc_ids}
    qs = {f"q{j}": Query(f"q{j}", f"query {j}") for j in range(queries)}
    collection = Collection(name=f"planted-{kind}", documents=documents, queries=qs,
                            qrels={q: {doc_ids[0]: 1} for q in qs}, checksum=f"planted-{kind}-{seed}")
    return collection, {**vectors, **query_vectors}


def table_scorer(table, metric: str) -> BiEncoder:
    scorer = BiEncoder(TableEncoder(table, f"planted-{metric}"))
    scorer.metric = metric
    return scorer


def exhaustive(scorer, collection: Collection, keep: int, exclude: dict | None = None) -> dict:
    """Today's whole-corpus ranking: every document scored, tie rule, top `keep`."""
    exclude = exclude or {}
    out = {}
    for qid, query in collection.queries.items():
        candidates = [d for d in collection.documents.values() if d.doc_id != exclude.get(qid)]
        scores = scorer.score(query, candidates)
        out[qid] = [(d, scores[d]) for d in ranked(scores)[:keep]]
    return out


def bm25_collection(docs: int = 300, seed: int = 3) -> Collection:
    """Short texts over a small vocabulary, every third document duplicated under another id (ties)."""
    rng = np.random.default_rng(seed)
    words = ["ozone", "layer", "crime", "money", "bank", "fraud", "taste", "umami", "fever", "heat",
             "protein", "cell", "graph", "network", "method", "result"]
    texts = [" ".join(rng.choice(words, size=rng.integers(3, 9))) for _ in range(docs)]
    texts += texts[::3]
    ids = [f"b{i:04d}" for i in rng.permutation(len(texts))]
    documents = {d: Document(d, "", t) for d, t in zip(ids, texts)}
    queries = {f"q{j}": Query(f"q{j}", " ".join(rng.choice(words, size=2))) for j in range(10)}
    return Collection(name="bm25-ties", documents=documents, queries=queries,
                      qrels={q: {ids[0]: 1} for q in queries}, checksum=f"bm25-{seed}")
