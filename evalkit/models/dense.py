"""Embedding models: bi-encoders (instruction-agnostic or instructed) and multi-vector matching."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Document, Query
from evalkit.data.runs import ranked
from evalkit.models.base import index_documents
from evalkit.retrieval.embeddings import Encoder
from evalkit.retrieval.exact_search import search_device
from evalkit.retrieval.executors import IN_PROCESS, device_part
from evalkit.retrieval.vector_index import VectorIndex

TEMPLATE_FIELDS = {"query_template": ("instruction", "query"), "empty_instruction_template": ("query",),
                   "doc_template": ("text", "title", "abstract")}


def _template_error(argument: str, problem: str) -> RequestError | DataError:
    """A request's argument (``query_template=``, spelled by each front end) or a model's setting."""
    return RequestError(argument.rstrip("="), problem) if argument.endswith("=") else DataError(argument, problem)


def check_template(argument: str, template, fields: Sequence[str]) -> None:
    """One line when `template` is not a string, is malformed or names a field other than `fields`
    (`argument` is the setting as the caller spells it: ``query_template=``, ``--query-template``)."""
    import string

    if not isinstance(template, str):
        raise _template_error(argument, f"{template!r} is a {type(template).__name__}, not a template string")
    try:
        named = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    except ValueError as exc:
        raise _template_error(argument, f"{template!r} is not a template ({exc}); write fields as "
                           f"{', '.join('{' + f + '}' for f in fields)} and braces as {{{{ }}}}") from None
    unknown = next((f for f in named if f not in fields), None)
    if unknown is not None:
        raise _template_error(argument, f"{template!r} names field {{{unknown}}}, which does not exist; its "
                           f"fields are {', '.join('{' + f + '}' for f in fields)}")


class BiEncoder:
    """One query vector against one vector per candidate (title + abstract); cosine by default.

    The query text is ``query_template.format(instruction=..., query=...)``: ``{query}``
    alone makes an instruction-agnostic model; a template with ``{instruction}`` is an
    instructed embedder or, for a model never trained on instructions, a
    prompt-sensitivity probe. A query whose instruction is blank uses
    ``empty_instruction_template`` (default ``{query}``), so no template leaves an empty
    instruction slot (``Instruct: \nQuery:``) in the text.

    Subclasses (`evalkit.models.paper`) override `query_vectors`, `text_vectors` and
    `similarity`; everything else (first-stage reranking, the facet hybrid, the full
    protocol's index) goes through those. With a `first_stage` scorer, only its top `depth`
    candidates are scored by this model (raw similarities) and the others follow below them
    in first-stage order: the paper's instructed retrievers rerank SciNCL's top 200.
    """

    metric = "cosine"  # "cosine": dot of normalised vectors; "l2": negative Euclidean distance
    doc_fields = TEMPLATE_FIELDS["doc_template"]  # the fields document_string fills

    def __init__(self, encoder: Encoder | None, query_template: str = "{query}", doc_template: str = "{text}",
                 empty_instruction_template: str = "{query}", first_stage=None, depth: int | None = None):
        for name, template in (("query_template", query_template), ("doc_template", doc_template),
                               ("empty_instruction_template", empty_instruction_template)):
            check_template(name, template, self.doc_fields if name == "doc_template" else TEMPLATE_FIELDS[name])
        for name, template, fields in (("query_template", query_template, ("{query}",)),
                                       ("empty_instruction_template", empty_instruction_template, ("{query}",)),
                                       ("doc_template", doc_template, ("{text}", "{abstract}"))):
            if not any(field in template for field in fields):
                raise DataError(name, f"{template!r} must contain {' or '.join(fields)}; fix the model config")
        if "{instruction}" in empty_instruction_template:
            raise DataError("empty_instruction_template", "is used when the instruction is blank; "
                               "it must not contain {instruction}")
        self.encoder = encoder
        self.query_template = query_template
        self.empty_instruction_template = empty_instruction_template
        self.doc_template = doc_template
        self.reads_instruction = "{instruction}" in query_template
        self.first_stage = first_stage
        self.depth = None if depth is None else int(depth)
        self._documents_of = None  # (corpus, executor) whose index gives document vectors: `index_documents`
        self._index = None
        if first_stage is not None and (self.depth is None or self.depth < 1):
            raise RequestError("depth", "must be a positive integer when a first_stage is set; fix the model config",
                               value=depth)

    # -- what subclasses override ---------------------------------------------------------
    def query_string(self, query: Query) -> str:
        template = self.query_template if query.instruction.strip() else self.empty_instruction_template
        return template.format(instruction=query.instruction, query=query.text)

    def document_string(self, document: Document) -> str:
        return self.doc_template.format(text=document.full_text, title=document.title, abstract=document.text)

    def query_vectors(self, queries: Sequence[Query]) -> np.ndarray:
        return self.encoder.encode([self.query_string(q) for q in queries], "queries")

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of candidate-side texts (already through `doc_template`'s ``{text}``)."""
        return self._documents([self.doc_template.format(text=t, title="", abstract=t) for t in texts])

    def doc_vectors(self, candidates: Sequence[Document]) -> np.ndarray:
        """The candidates' rows of the collection's index where a run gave one (`index_documents`),
        else their vectors through the embedding cache."""
        indexed = self.indexed_vectors(candidates)
        if indexed is not None:
            return indexed
        return self._documents([self.document_string(d) for d in candidates])

    def _documents(self, strings: list[str]) -> np.ndarray:
        """Vectors of document-side model inputs, through the embedding cache (a subclass's own)."""
        return self.encoder.encode(strings, "documents")

    def similarity(self, query_vector: np.ndarray, doc_vectors: np.ndarray) -> np.ndarray:
        """One score per row, each a function of that row alone: a document scores the same whatever
        is scored beside it (a pool, a search's shortlist). Hence einsum's fixed-order loop for the
        dot product, not BLAS, whose matrix-vector kernels round a row by its position."""
        if self.metric == "l2":
            return -np.linalg.norm(doc_vectors.astype(np.float64) - query_vector.astype(np.float64), axis=1)
        return np.einsum("ij,j->i", doc_vectors, query_vector)

    def document_side(self) -> dict:
        """What makes a document vector (keys the corpus index): the encoder and the template."""
        return {"fingerprint": self.encoder.fingerprint, "doc_template": self.doc_template}

    def document_input(self, document: Document) -> str:
        """The exact model input a document's vector is made from (a corpus index encodes each
        distinct one once: `evalkit.retrieval.vector_index.batch_plan`)."""
        return self.document_string(document)

    def index_vectors(self, documents: Sequence[Document]) -> np.ndarray:
        """The model's vectors of `documents` for a corpus index: the model alone, no embedding
        cache in between, so a batch's vectors depend on its contents only."""
        texts = [self.document_string(d) for d in documents]
        compute = getattr(self.encoder, "compute", None)  # `Encoder.compute`; a user's encoder: its encode
        return compute(texts) if compute is not None else self.encoder.encode(texts, "documents")

    # -- shared ---------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        """Pickled (a Ray worker encoding the index's batches) without the corpus and its open index."""
        return {**self.__dict__, "_documents_of": None, "_index": None}

    def index_documents(self, corpus, executor=None) -> None:
        """Take the vectors of `corpus`'s documents from its index (`corpus_index`, float32, built on
        first use by `executor`), here and in the first stage: a document's vector is then the same
        bits in a pool run, a pooled run and a run of any subset of the queries, whatever a cache
        held before, and the collection's documents are encoded once for all of them. A model with no
        fingerprint to key an index by (a user's encoder) encodes through the cache as before."""
        index_documents(self.first_stage, corpus, executor)
        if self.document_side().get("fingerprint") is not None:
            self._documents_of, self._index = (corpus, executor), None

    def indexed_vectors(self, documents: Sequence[Document]) -> np.ndarray | None:
        """The index rows of `documents` (`index_documents`); None when no index was given or a
        document is not in it (then they are encoded as any text is)."""
        if self._documents_of is None:
            return None
        if self._index is None:
            corpus, executor = self._documents_of
            index = self.corpus_index(corpus, "float32", executor)
            self._index = (index, {doc: row for row, doc in enumerate(index.ids)})
        index, row_of = self._index
        rows = [row_of.get(d.doc_id) for d in documents]
        if None in rows:
            return None
        return np.asarray(index.matrix[rows], dtype=np.float32)

    def can_search(self, excluding: bool) -> bool:
        """A corpus is searched in an index unless this model reranks a first stage, or its encoder
        has no fingerprint to key an index by (a user's object the kit cannot identify: every
        document is then scored per query, its vectors kept for this run only)."""
        return self.first_stage is None and self.document_side().get("fingerprint") is not None

    def corpus_index(self, corpus, dtype: str = "float32", executor=None):
        """The `evalkit.retrieval.vector_index.VectorIndex` of `corpus` under this model (built once, on
        disk; its batches encoded by `executor`, `evalkit.retrieval.executors`, here by default); an
        index encoded on workers' GPUs is another index than this process's (`device_part`)."""
        parts = {**self.document_side(), **device_part(executor or IN_PROCESS)}
        return VectorIndex.open(corpus, self.index_vectors, parts, dtype, executor, self.document_input)

    def search(self, queries: Sequence[Query], corpus, k: int, exclude=None,
               dtype: str = "float32", executor=None) -> dict[str, dict[str, float]]:
        """Each query's top `k` of `corpus` by `similarity`, as `score` over every document ranks
        them (`evalkit.retrieval.vector_index`); queries are encoded in one batch, here; the
        corpus's vectors and the search by `executor` (here by default, or on Ray workers)."""
        exclude = exclude or {}
        executor = executor or IN_PROCESS
        search_device()  # a device that cannot search is refused before anything is encoded
        index = self.corpus_index(corpus, dtype, executor)
        vectors = self.query_vectors(list(queries)) if queries else np.zeros((0, index.dim), np.float32)
        found = executor.search(index, vectors, k, [exclude.get(q.qid) for q in queries], self.metric,
                                self.similarity)
        return {q.qid: hits for q, hits in zip(queries, found)}

    def query_vector(self, query: Query) -> np.ndarray:
        return self.query_vectors([query])[0]

    def prepare(self, documents: Sequence[Document]) -> None:
        if self.first_stage is not None:
            self.first_stage.prepare(documents)
        self.doc_vectors(documents)

    def similarities(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        """This model's raw similarity for every candidate (no first stage)."""
        if not candidates:
            return {}
        scores = self.similarity(self.query_vector(query), self.doc_vectors(candidates))
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        if self.first_stage is None:
            return self.similarities(query, candidates)
        return rerank_head(self.first_stage.score(query, candidates), candidates, self.depth,
                           lambda head: self.similarities(query, head))

    def describe(self) -> dict:
        described = {"family": "dense", "model": self.encoder.location, "revision": self.encoder.revision,
                     "query_template": self.query_template, "doc_template": self.doc_template}
        if self.empty_instruction_template != "{query}":
            described["empty_instruction_template"] = self.empty_instruction_template
        return self._with_first_stage(described)

    def _with_first_stage(self, described: dict) -> dict:
        if self.first_stage is None:
            return described
        return {**described, "first_stage": self.first_stage.describe(), "depth": self.depth}


def rerank_head(first: dict[str, float], candidates: Sequence[Document], depth: int, score_head) -> dict[str, float]:
    """The first stage's top `depth` scored by `score_head(head documents)`; every other
    candidate below the lowest of those, in first-stage order (strictly decreasing)."""
    order = ranked(first)
    by_id = {d.doc_id: d for d in candidates}
    head = score_head([by_id[d] for d in order[:depth]])
    floor = min(head.values(), default=0.0)
    tail = order[depth:]
    return {**head, **{doc: floor - 1.0 - i for i, doc in enumerate(tail)}}


class MultiVector:
    """otAspire-LIKE approximation (offline profile only): each sentence encoded on its own by
    a sentence-transformers model, not otAspire's contextual sentence vectors; the paper's
    otAspire is `evalkit.models.paper.OTAspire`.

    The query's focus sentences (the seed's sentences of the requested facet, all its
    sentences if it has none) are matched against every sentence of a candidate: ``ot`` scores the negative optimal
    transport cost (uniform weights, Euclidean cost, as otAspire), ``maxsim`` the mean
    over seed sentences of the best cosine similarity, ``max`` the best cosine similarity
    over every (seed sentence, candidate sentence) pair: the Aspire code's sentence baselines
    (allenai/aspire pp_gen_nearest.py ``rank_pool_sentfaceted``, score type ``cosine``: the
    seed's sentences of the facet, objective counted as background, against each candidate
    sentence encoded on its own, the candidate's score the maximum), e.g. its ``sbmpnet1B``
    row with all-mpnet-base-v2.
    """

    reads_instruction = False
    MATCHINGS = ("ot", "maxsim", "max")

    def __init__(self, encoder: Encoder, matching: str = "ot"):
        if matching not in self.MATCHINGS:
            raise DataError("model settings",
                            f"unknown matching {matching!r}; choose one of {', '.join(self.MATCHINGS)}")
        self.encoder = encoder
        self.matching = matching

    def _sentences(self, document: Document) -> list[str]:
        return [s.text for s in document.sentences] or [document.title]

    def prepare(self, documents: Sequence[Document]) -> None:
        self.encoder.encode([s for d in documents for s in self._sentences(d)], "sentences")

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        vectors = self.encoder.encode(list(query.focus_sentences) or [query.seed.title], "queries")
        return {d.doc_id: self._match(vectors, self.encoder.encode(self._sentences(d), "sentences"))
                for d in candidates}

    def _match(self, query: np.ndarray, doc: np.ndarray) -> float:
        if self.matching == "maxsim":
            return float((query @ doc.T).max(axis=1).mean())
        if self.matching == "max":
            return float((query @ doc.T).max())
        import ot  # lazy: POT pulls in torch and scikit-learn (seconds of start-up); only OT matching needs it

        cost = ot.dist(query.astype(np.float64), doc.astype(np.float64), metric="euclidean")
        weights_q = np.full(len(query), 1.0 / len(query))
        weights_d = np.full(len(doc), 1.0 / len(doc))
        return -float(ot.emd2(weights_q, weights_d, cost))

    def describe(self) -> dict:
        return {"family": "multivector", "model": self.encoder.location, "revision": self.encoder.revision,
                "matching": self.matching}
