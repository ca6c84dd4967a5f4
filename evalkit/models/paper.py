"""The paper's embedding models as kit scorers, each over its reference encoder (`evalkit.encoders`)
behind the one embedding cache (`evalkit.retrieval.embeddings.CachedVectors`).

| registry family | paper model | encoder (tested equal to the authors' code) | similarity |
|---|---|---|---|
| ``gritlm`` | GritLM-7B | `encoders.gritlm.GritLMEncoder` (``gritlm`` package) | cosine |
| ``promptriever`` | Promptriever | `encoders.promptriever.PromptrieverEncoder` (tevatron fork) | cosine |
| ``paper-cls`` | SciNCL; Specter2 with ``adapter`` | `encoders.bert_cls` / `encoders.specter2` | negative L2 |
| ``aspire`` | otAspire | `encoders.aspire.AspireEncoder` + `ot_score` | authors' OT score |

Texts. Documents go through the entry's ``doc_template`` (fields ``{title}``, ``{abstract}``
(the body), ``{text}`` (title and body joined by a space) and, for ``paper-cls``, ``{sep}``:
the tokenizer's separator token, so SciNCL's and Specter2's ``{title}{sep}{abstract}`` is
their authors' ``title + tokenizer.sep_token + abstract``). Instructed models read
`Query.instruction` and `Query.text`; the encoder adds its own prefixes, and a blank
instruction gets the authors' no-instruction form (GritLM ``<|embed|>\\n``, Promptriever no
prompt), never an empty slot. ``paper-cls`` models are instruction-agnostic: a query that
is a seed paper (CSFCube, also with a prompt appended) is encoded as a paper through the
same template, any other query text (Aspect subset's facet sentences, BEIR queries) as is.

Similarity. GritLM and Promptriever: the dot product of L2-normalised vectors (cosine), as
their packages rank. SciNCL and Specter2: negative Euclidean distance of the raw [CLS]
vectors, as the CSFCube baselines of the Aspire code rank SPECTER-style embeddings
(allenai/aspire src/pre_process/pp_gen_nearest.py `rank_pool`: sklearn NearestNeighbors,
Euclidean) and as SciDocs ranks; ``metric: cosine`` in the entry switches to cosine. otAspire:
the whole query paper is encoded in context, only the rows of the requested facet's
sentences are matched against every candidate sentence with the authors' OT score
(`encoders.aspire.ot_score`; pp_gen_nearest.py CachingTrainedScoringModel.predict), the
candidates scored in the authors' batches of 64 in pool order (`OTAspire`, ``diameter``).

Every instructed entry may name a ``first_stage`` and ``depth``: it then reranks that
model's top ``depth`` of whatever candidates the protocol gives (`dense.rerank_head`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalkit.core.devices import device_kind, resolve_device
from evalkit.core.errors import DataError
from evalkit.data.collection import Document, Query
from evalkit.models.dense import BiEncoder
from evalkit.retrieval.embeddings import CachedVectors, location_settings


def pinned(described: dict, device: str, *locations: tuple[str, str | None, str | None]) -> dict:
    """An encoder's describe() with each (field, location, revision) pinned by `location_settings`
    (a local folder by its content hash) and the device kind (GPU kernels change the last bits)."""
    settings = {**described, "device_kind": device_kind(device)}
    for field, location, revision in locations:
        if location:
            settings[field] = location_settings(location, revision)
    return settings


def on_workers_device(scorer: PaperBiEncoder, named: str | None) -> PaperBiEncoder:
    """`scorer`, told whether its entry named a device: if not, a copy sent to a Ray worker
    encodes on that worker's device (`PaperBiEncoder.__setstate__`)."""
    scorer.named_device = named is not None
    return scorer


class PaperBiEncoder(BiEncoder):
    """A BiEncoder over a reference encoder: vectors cached by the exact model input."""

    def __init__(self, encoder, settings: dict, doc_template: str, first_stage=None, depth: int | None = None,
                 metric: str = "cosine", encode_documents=None):
        super().__init__(None, "{query}", doc_template, first_stage=first_stage, depth=depth)
        if metric not in ("cosine", "l2"):
            raise DataError("model settings", f"unknown metric {metric!r}; choose cosine or l2")
        self.metric = metric
        self.reference = encoder
        self.encode_documents = encode_documents or encoder.encode_documents
        self.vectors = CachedVectors(settings)
        self.named_device = True  # the entry named the device (the builders say when it did not)

    def __setstate__(self, state: dict) -> None:
        """A copy (on a Ray worker) of a model whose entry names no device runs its encoder on
        the device of the process it lands in (its GPU), not the sender's (a CPU-only driver), in
        the dtype that device takes when the entry names none (the encoder's `place`: GritLM's
        checkpoint dtype, Promptriever's bfloat16, as on a GPU driver), not the CPU's float32."""
        self.__dict__.update(state)
        if not self.named_device and hasattr(self.reference, "device"):
            place = getattr(self.reference, "place", None)
            if place is not None:
                place(resolve_device())
            else:
                self.reference.device = resolve_device()

    def _documents(self, strings: list[str]) -> np.ndarray:
        return self.vectors.stack(strings, lambda s: ("document", s), self.encode_documents, "documents")

    def document_side(self) -> dict:
        return {"fingerprint": self.vectors.fingerprint, "doc_template": self.doc_template}

    def index_vectors(self, documents: Sequence[Document]) -> np.ndarray:
        return np.asarray(self.encode_documents([self.document_string(d) for d in documents]), dtype=np.float32)

    def describe(self) -> dict:
        return self._with_first_stage({**self.vectors.settings, "doc_template": self.doc_template,
                                       "similarity": self.metric})


class InstructedBiEncoder(PaperBiEncoder):
    """GritLM or Promptriever: queries are (instruction, text) pairs the encoder formats itself.

    `query_input(text, instruction)` is the exact model input of a query, the cache key:
    GritLM's (instruction prefix, text) (the pooled span starts after the prefix),
    Promptriever's formatted query string.
    """

    def __init__(self, encoder, settings: dict, doc_template: str, query_input, first_stage=None,
                 depth: int | None = None, encode_documents=None):
        super().__init__(encoder, settings, doc_template, first_stage, depth, encode_documents=encode_documents)
        self.query_input = query_input
        self.reads_instruction = True

    def query_string(self, query: Query) -> str:
        found = self.query_input(query.text, query.instruction)
        return found if isinstance(found, str) else "".join(found)

    def query_vectors(self, queries: Sequence[Query]) -> np.ndarray:
        def compute(pairs: list[tuple[str, str]]) -> np.ndarray:
            return self.reference.encode_queries([t for _, t in pairs], [i for i, _ in pairs])

        return self.vectors.stack([(q.instruction, q.text) for q in queries],
                                  lambda pair: ("query", self.query_input(pair[1], pair[0])), compute, "queries")


class PromptrieverBiEncoder(InstructedBiEncoder):
    """Promptriever: documents as the authors' tevatron ``format_passage`` writes them,
    ``passage:  {title} {text}`` from the title and the body, each stripped (three spaces
    after ``passage:`` for an empty title, as BEIR documents without one get); a text that
    is not a document (`text_vectors`) is ``passage:  {text}``."""

    def document_string(self, document: Document) -> str:
        # lazy (start-up cost): an encoder's module loads only when its family is built
        from evalkit.encoders.promptriever import format_passage

        return format_passage(document.text, document.title)

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        # lazy (start-up cost): an encoder's module loads only when its family is built
        from evalkit.encoders.promptriever import format_passage

        return self._documents([format_passage(t) for t in texts])


class PaperClsBiEncoder(PaperBiEncoder):
    """SciNCL / Specter2: queries are papers too (the seed through the document template)."""

    reads_instruction = False
    doc_fields = ("text", "title", "abstract", "sep")

    def document_string(self, document: Document) -> str:
        return self.doc_template.format(text=document.full_text, title=document.title, abstract=document.text,
                                        sep=self.reference.sep_token)

    def text_vectors(self, texts: Sequence[str]) -> np.ndarray:
        return self._documents(list(texts))

    def query_string(self, query: Query) -> str:
        seed = query.seed
        if seed is not None and query.text.startswith(seed.full_text):
            rest = query.text[len(seed.full_text):]  # a prompt appended by the runner
            return self.document_string(Document(seed.doc_id, seed.title, seed.text + rest))
        return query.text

    def query_vectors(self, queries: Sequence[Query]) -> np.ndarray:
        return self._documents([self.query_string(q) for q in queries])


def _build_instructed(settings: dict, first_stage, family: str, encoder_class, query_input,
                      options: tuple[str, ...] = (), extra_locations=lambda encoder: (),
                      scorer_class=InstructedBiEncoder) -> InstructedBiEncoder:
    """GritLM or Promptriever from a registry entry: the encoder gets the common settings plus the
    family's `options`; its weights (and `extra_locations(encoder)`) are pinned in the cache fingerprint."""
    s = dict(settings)
    named = s.pop("device", None)
    device = resolve_device(named)
    doc_template = s.pop("doc_template", "{text}")
    if scorer_class is PromptrieverBiEncoder and doc_template != "{text}":
        raise DataError(f"doc_template {doc_template!r}", "Promptriever writes its passages as its authors do "
                        "(passage:  {title} {text}); drop doc_template from the entry")
    encoder = encoder_class(s.pop("model"), revision=s.pop("revision", None), device=device,
                            max_length=s.pop("max_length", None), batch_size=s.pop("batch_size", 8),
                            dtype=s.pop("dtype", None), **{name: s.pop(name, None) for name in options})
    depth = s.pop("depth", None)
    settings_ = pinned(encoder.describe(), device, ("location", encoder.location, encoder.revision),
                       *extra_locations(encoder))
    exact = encoder.encode_passage_strings if scorer_class is PromptrieverBiEncoder else None
    return on_workers_device(scorer_class(encoder, settings_, doc_template, query_input, first_stage, depth, exact),
                             named)


def build_gritlm(settings: dict, first_stage=None) -> InstructedBiEncoder:
    # lazy (start-up cost): an encoder's module loads only when its family is built
    from evalkit.encoders.gritlm import GritLMEncoder, instruction_prefix

    return _build_instructed(settings, first_stage, "gritlm", GritLMEncoder,
                             lambda text, instruction: (instruction_prefix(instruction), text))


def build_promptriever(settings: dict, first_stage=None) -> InstructedBiEncoder:
    # lazy (start-up cost): an encoder's module loads only when its family is built
    from evalkit.encoders.promptriever import PromptrieverEncoder, format_query

    return _build_instructed(settings, first_stage, "promptriever", PromptrieverEncoder, format_query,
                             ("base", "base_revision", "query_max_length", "passage_max_length"),
                             lambda encoder: [("base", encoder.base, encoder.base_revision)], PromptrieverBiEncoder)


def build_paper_cls(settings: dict, first_stage=None) -> PaperClsBiEncoder:
    """SciNCL (no adapter) or Specter2 (base model + AdapterHub adapter, run natively)."""
    # lazy (start-up cost): an encoder's module loads only when its family is built
    from evalkit.encoders.bert_cls import BertClsEncoder
    from evalkit.encoders.specter2 import Specter2Encoder

    s = dict(settings)
    named = s.pop("device", None)
    device = resolve_device(named)
    doc_template = s.pop("doc_template", "{title}{sep}{abstract}")
    metric = s.pop("metric", "l2")
    common = {"revision": s.pop("revision", None), "device": device, "max_length": s.pop("max_length", 512),
              "batch_size": s.pop("batch_size", 16)}
    location = s.pop("model")
    if s.get("adapter"):
        adapter, adapter_revision = s.pop("adapter"), s.pop("adapter_revision", None)
        encoder = Specter2Encoder(location, adapter=adapter, adapter_revision=adapter_revision, **common)
    else:
        s.pop("adapter", None)
        adapter, adapter_revision = None, None
        encoder = BertClsEncoder(location, **common)
    depth = s.pop("depth", None)
    settings_ = pinned(encoder.describe(), device, ("location", location, common["revision"]),
                       ("adapter_location", adapter, adapter_revision))
    return on_workers_device(PaperClsBiEncoder(encoder, settings_, doc_template, first_stage, depth, metric,
                                               encoder.encode_texts), named)


DIAMETERS = ("batch", "pair")
SCORE_BATCH = 64  # pp_gen_nearest.py CachingTrainedScoringModel.predict: score_batch_size


class OTAspire:
    """otAspire: contextual sentence vectors of whole papers, the query facet's rows matched to
    every candidate sentence by the authors' optimal-transport score (larger is more similar).

    The query paper is the seed (title and its sentences, encoded in one pass); the rows of
    the sentences labelled with the query's facet are kept (all rows when the facet has none
    within the 500-token budget). Candidates without a sentence split are one sentence.

    ``diameter``: ``batch`` (default, the authors' CachingTrainedScoringModel.predict): the
    candidates are scored in batches of `SCORE_BATCH` in the order given (pool order), and
    GeomLoss's epsilon schedule starts from the diameter of the whole batch
    (`encoders.aspire.batch_diameter`); ``pair``: each pair's own diameter, so a score does
    not depend on its neighbours in the pool (not how the authors scored).
    """

    reads_instruction = False

    def __init__(self, encoder, settings: dict, solver: str = "sinkhorn", diameter: str = "batch"):
        # lazy (start-up cost): an encoder's module loads only when its family is built
        from evalkit.encoders.aspire import batch_diameter, ot_score

        if solver not in ("sinkhorn", "emd"):
            raise DataError("model settings",
                            f"unknown otAspire solver {solver!r}; choose sinkhorn (the authors') or emd")
        if diameter not in DIAMETERS:
            raise DataError("model settings",
                            f"unknown otAspire diameter {diameter!r}; choose batch (the authors') or pair")
        self.reference = encoder
        self.solver = solver
        self.diameter = diameter
        self._ot_score = ot_score
        self._batch_diameter = batch_diameter
        self.vectors = CachedVectors(settings, matrices=True)

    @staticmethod
    def paper(document: Document) -> tuple[str, tuple[str, ...]]:
        return document.title, tuple(s.text for s in document.sentences) or (document.text,)

    def matrices(self, documents: Sequence[Document]) -> list[np.ndarray]:
        return self.vectors.get([self.paper(d) for d in documents], lambda p: [p[0], list(p[1])],
                                self.reference.encode, "papers")

    def prepare(self, documents: Sequence[Document]) -> None:
        self.matrices(documents)

    def query_rows(self, query: Query) -> np.ndarray:
        if query.seed is None:
            raise DataError("collection",
                            f"otAspire ranks by a seed paper; query {query.qid} has none (use a query-by-document "
                            "collection such as CSFCube)")
        rows = self.matrices([query.seed])[0]
        labels = [s.label for s in query.seed.sentences][:len(rows)]
        chosen = [i for i, label in enumerate(labels) if query.facet and label == query.facet]
        return rows[chosen] if chosen else rows

    def pair_scores(self, rows: np.ndarray, matrices: Sequence[np.ndarray]) -> list[float]:
        """Scores of the candidates' matrices, in order: per batch of `SCORE_BATCH` with the
        batch's diameter (``batch``), or each with its own (``pair``; also for ``emd``)."""
        if self.solver != "sinkhorn" or self.diameter == "pair":
            return [self._ot_score(rows, m, solver=self.solver) for m in matrices]
        scores = []
        for start in range(0, len(matrices), SCORE_BATCH):
            batch = matrices[start:start + SCORE_BATCH]
            diameter = self._batch_diameter(rows, batch)
            scores.extend(self._ot_score(rows, m, diameter=diameter) for m in batch)
        return scores

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        import torch

        rows = self.query_rows(query)
        matrices = self.matrices(candidates)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # ~60 tiny ops a pair: thread hand-offs cost more than they give (10x on 2 cores)
        try:
            return {d.doc_id: s for d, s in zip(candidates, self.pair_scores(rows, matrices))}
        finally:
            torch.set_num_threads(threads)

    def describe(self) -> dict:
        diameter = f"per batch of {SCORE_BATCH} candidates in pool order" if self.diameter == "batch" else "per pair"
        return {**self.vectors.settings, "solver": self.solver,
                "diameter": diameter if self.solver == "sinkhorn" else None,
                "query": "whole seed encoded, rows of the facet's sentences"}


def build_aspire(settings: dict, first_stage=None) -> OTAspire:
    # lazy (start-up cost): an encoder's module loads only when its family is built
    from evalkit.encoders.aspire import MAX_NUM_TOKS, AspireEncoder

    s = dict(settings)
    device = resolve_device(s.pop("device", None))
    encoder = AspireEncoder(s.pop("model"), revision=s.pop("revision", None), device=device,
                            max_tokens=s.pop("max_tokens", MAX_NUM_TOKS), batch_size=s.pop("batch_size", 8))
    solver = s.pop("solver", "sinkhorn")
    diameter = s.pop("diameter", "batch")
    settings_ = pinned(encoder.describe(), device,
                       ("location", encoder.location, encoder.revision))
    return OTAspire(encoder, settings_, solver, diameter)

