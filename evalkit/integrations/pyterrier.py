"""Any kit collection as a PyTerrier dataset, any kit model as a PyTerrier transformer.

``kit = dataset("csfcube")`` is a ``pt.datasets.Dataset`` of the collection as a protocol ranks
and judges it (`evalkit.data.protocols.protocol_collection`; default ``pool``), under one
instruction variant (default ``base``), for some queries (``seeds=`` / ``queries=``, the rule of
every front end: `evalkit.data.collection.select_queries`):

- ``get_topics()``: ``qid``, ``query`` (the query text), ``instruction`` (its instruction, ``""``
  where it has none), in collection order;
- ``get_qrels()``: ``qid``, ``docno``, ``label``: the graded judgments the protocol scores against
  (`evalkit.integrations.library_input.judgments`: under ``pool`` a CSFCube seed is not judged
  in its own pools);
- ``get_corpus_iter()``: one ``{"docno", "text", "title", "abstract"}`` per document, ``text`` the
  title and abstract joined by a space (what the kit's models read, its ``{text}`` template field);
- ``get_results()``: each query's candidate list as the protocol gives it (CSFCube's judged pool,
  the seed left out under ``pool``), in the collection's order, ``score`` decreasing along it: the
  candidates the kit's own runs rank; ``candidates()`` is the transformer that gives them for a
  topics frame, so ``kit.candidates() >> kit.reranker(model)`` is a reranking pipeline;
- ``measures("nDCG@20", "AP", "RR")``: the ir_measures measures equal to those kit measures on this
  collection (`evalkit.integrations.ir_measures.ir_measures_of`, the request's measure rules, then
  `evalkit.evaluation.measures.parse_measure`: binary ones carry the collection's
  relevance level, CSFCube's ``AP(rel=2)``; ``nDCG@20`` is trec_eval's, gain / log2(rank + 1),
  not the study's ``nDCG_csfcube@20``).

``kit.retriever(model)`` and ``kit.reranker(model)`` are ``pt.Transformer`` objects of a kit model:
a name (a registry model, an ``st:`` spec, a name `evalkit.api.register_model` gave) or a model
object as `evalkit.evaluate` takes it (`evalkit.models.objects`: a SentenceTransformer or another
``encode`` object, a ``score(query, documents)`` callable, a kit ``Scorer``; ``query_template=``
and the other templates as in `evaluate`). The model is built and prepared by the kit's runner
(`evalkit.pipeline.runner.bind`, `prepare`): the same scorer, queries and candidates, every candidate
prepared (encoded) once, as a run of `evalkit.evaluate` on the same dataset, protocol, variant and
queries. The retriever ranks each topic's candidates (a collection without candidate lists: its
whole corpus, the top `evalkit.pipeline.runner.KEEP`), the reranker scores the documents of each
query in its input frame (only the query's candidates as the protocol gives them, the rule of
every run a user gives: `evalkit.data.protocols.check_protocol_run`). A row's ``query`` and,
where the frame has the column, ``instruction`` (an empty cell: none) are the text and
instruction the model reads (a query rewritten upstream is scored as rewritten); the rest of the
query (a CSFCube seed, its facet) is the kit's.

Ranks are the kit's: documents are ordered by its one tie rule (`evalkit.data.runs.ranked`: score
descending, then document id ascending), ``rank`` counts from 0 along it and ``score`` is the
kit's strictly decreasing n, ..., 1 (`evalkit.evaluation.measures.rank_scores`), so PyTerrier's
evaluation (ir_measures over pytrec_eval, which breaks ties by document id descending) ranks as
the kit does; with ``keep_scores=True`` ``score`` is the model's own, and tied scores are then
ranked by the library's rule. So ``pt.Experiment`` over the kit's topics and qrels gives the
kit's per-query figures, and its paired t-tests (``baseline=``, ``correction="holm"``: Holm over
the systems other than the baseline, per measure) the kit's rows of ``evalkit evaluate`` with the
baseline as the first run (tests/integrations/test_integrations_pyterrier.py).

PyTerrier's core (``pyterrier``, 1.x) needs no Java: datasets, transformers and ``pt.Experiment``
are Python; only its Terrier parts (``pt.terrier``: Terrier indexes and retrievers) start a JVM,
through the optional ``pyterrier[java]`` (pyjnius) and a JDK. Nothing here uses them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import pandas as pd
import pyterrier as pt

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import BASE, Collection, Query, select_queries, select_variant
from evalkit.data.protocols import POOL_PROTOCOLS, check_protocol, check_protocol_run, protocol_collection
from evalkit.data.runs import Run, add_score, ranked
from evalkit.data.runstore import check_run
from evalkit.datasets import load_dataset
from evalkit.evaluation.measures import rank_scores
from evalkit.integrations.ir_measures import ir_measures_of
from evalkit.integrations.library_input import judgments
from evalkit.models import adhoc, registry
from evalkit.models.dense import TEMPLATE_FIELDS, check_template
from evalkit.models.identity import identity_and_reason
from evalkit.models.objects import prepare_object
from evalkit.pipeline.runner import KEEP, RunSettings, bind, prepare, whole_corpus
from evalkit.retrieval.corpus import rank_corpus

TOPIC_COLUMNS = ["qid", "query", "instruction"]
RESULT_COLUMNS = ["docno", "score", "rank"]
QRELS_COLUMNS = ["qid", "docno", "label"]


class KitDataset(pt.datasets.Dataset):
    """A kit collection as PyTerrier sees it (the module docstring); made by `dataset`."""

    def __init__(self, collection: Collection, protocol: str, variant: str, queries: tuple[str, ...] | None,
                 profile: str) -> None:
        self.collection = collection
        self.protocol = protocol
        self.variant = variant
        self.queries = queries  # None: every query
        self.profile = profile
        self.judged = protocol_collection(collection, protocol)  # as the protocol ranks and judges it

    def __repr__(self) -> str:
        return f"KitDataset({self.collection.name}, protocol={self.protocol}, variant={self.variant})"

    @property
    def qids(self) -> list[str]:
        """The dataset's query ids, in collection order."""
        return list(self.collection.queries) if self.queries is None else list(self.queries)

    def _variant(self, variant: str | None) -> str:
        return select_variant(self.collection, self.variant if variant is None else variant)

    def get_topics(self, variant: str | None = None) -> pd.DataFrame:
        """``qid``, ``query``, ``instruction`` of each query under `variant` (default: the dataset's)."""
        variant = self._variant(variant)
        chosen = [self.collection.query(qid, variant) for qid in self.qids]
        return pd.DataFrame([[q.qid, q.text, q.instruction] for q in chosen], columns=TOPIC_COLUMNS)

    def get_qrels(self, variant: str | None = None) -> pd.DataFrame:
        """``qid``, ``docno``, ``label``: the protocol's judgments of the dataset's queries."""
        judged = judgments(self.collection, self.protocol, self.qids)
        rows = [[qid, doc, grade] for qid, grades in judged.items() for doc, grade in grades.items()]
        return pd.DataFrame(rows, columns=QRELS_COLUMNS)

    def get_corpus_iter(self, *, verbose: bool = False) -> Iterator[dict[str, str]]:
        """One ``{"docno", "text", "title", "abstract"}`` per document of the collection."""
        for doc in self.collection.documents.values():
            yield {"docno": doc.doc_id, "text": doc.full_text, "title": doc.title, "abstract": doc.text}

    def get_corpus_lang(self) -> str | None:
        return None

    def get_results(self, variant: str | None = None) -> pd.DataFrame:
        """Each query's candidates as the protocol gives them (`candidates` on the topics of `variant`)."""
        return self.candidates().transform(self.get_topics(variant))

    def candidates(self) -> KitCandidates:
        """A transformer from topics to each topic's candidates as the protocol gives them, in the
        collection's order (``score`` n, ..., 1 and ``rank`` 0, 1, ... along it), the topic's columns
        kept: ``kit.candidates() >> kit.reranker(model)`` reranks what the kit's runs rank."""
        if self.judged.candidates is None:
            raise DataError(self.collection.name, "gives no candidate lists (its models rank the whole corpus); "
                            "rank it with kit.retriever(model) instead")
        return KitCandidates(self)

    def measures(self, *names: str) -> list:
        """The ir_measures measures equal to the kit's `names` on this collection (module docstring),
        by the request's measure rules as every front end's (`evalkit.integrations.ir_measures.ir_measures_of`:
        none, one twice, an unknown name or one only the kit computes is the same line as there)."""
        return list(ir_measures_of(list(names), self.collection, self.protocol))

    def retriever(self, model, **options) -> KitRetriever:
        """A transformer that ranks each topic's candidates with `model` (`KitModel` for `options`)."""
        return KitRetriever(KitModel(self, model, **options))

    def reranker(self, model, **options) -> KitReranker:
        """A transformer that reranks each query's documents of its input frame with `model`."""
        return KitReranker(KitModel(self, model, **options))


def dataset(collection: Collection | str = "csfcube", *, protocol: str = "pool", variant: str = BASE,
            seeds: Sequence[str] | None = None, queries: Sequence[str] | None = None,
            profile: str = "offline") -> KitDataset:
    """`collection` (a `Collection`, or a dataset spec `evalkit.datasets.load_dataset` reads) as a
    PyTerrier dataset under `protocol` (``pool`` or ``released``) and instruction `variant`, for
    the queries of `seeds` or `queries` (default: all). `profile`: the registry profile model names are looked up in."""
    if check_protocol(protocol) not in POOL_PROTOCOLS:
        raise RequestError("protocol", "a PyTerrier dataset ranks each query's given candidates; choose "
                           f"{' or '.join(POOL_PROTOCOLS)} (a first stage is a PyTerrier pipeline's own)",
                           value=protocol)
    if profile not in registry.profiles():
        raise RequestError("profile", f"choose one of {', '.join(registry.profiles())}", value=profile)
    if isinstance(collection, str):
        collection = load_dataset(collection)
    elif not isinstance(collection, Collection):
        raise RequestError("dataset", f"a {type(collection).__name__} is not a collection; give a dataset spec such as "
                       "'csfcube' or an evalkit Collection")
    select_variant(collection, variant)
    return KitDataset(collection, protocol, variant, select_queries(collection, seeds=seeds, queries=queries), profile)


def _object_name(model, name: str | None, profile: str) -> str:
    """The name a model object is shown (and registered) under: `name`, else its class's or function's."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise RequestError("name", "give a non-empty string", value=name)
    shown = name or getattr(model, "__name__", None) or type(model).__name__
    if not isinstance(shown, str) or adhoc.is_st(shown) or shown in registry.model_names(profile):
        raise RequestError("name", "names a registry model or an st: spec; give your model another name", value=shown)
    return shown


class KitModel:
    """A kit model prepared by the kit's runner on a `KitDataset`: its scorer, each query under
    the dataset's variant, and each query's candidates (None: the whole corpus).

    `model`: a model name or object (module docstring); `name`: what PyTerrier shows (default: the
    model's name, or the object's class or function name); `query_template`, `doc_template`,
    `empty_instruction_template`, `revision`: a model object's templates and revision, as
    `evalkit.evaluate` takes them (its identity, `evalkit.models.identity`, keys its cached
    vectors, so the transformer and `evaluate` encode each text once and score alike);
    `keep_scores`: the model's own scores in ``score`` instead of the kit's n, ..., 1."""

    def __init__(self, kit: KitDataset, model, *, name: str | None = None, query_template: str = "{query}",
                 doc_template: str = "{text}", empty_instruction_template: str = "{query}",
                 revision: str | None = None, keep_scores: bool = False) -> None:
        if isinstance(model, str):
            registry.spec(model, kit.profile)  # an unknown name: one line, before any work
            if name is not None and (not isinstance(name, str) or not name.strip()):
                raise RequestError("name", "give a non-empty string", value=name)
            key, self.name, found = model, name or model, registry.current()
        else:
            templates = {"query_template": query_template, "doc_template": doc_template,
                         "empty_instruction_template": empty_instruction_template}
            for argument, template in templates.items():
                check_template(f"{argument}=", template, TEMPLATE_FIELDS[argument])
            prepare_object(model)
            self.name = _object_name(model, name, kit.profile)
            # its identity keys its cached vectors, as `evalkit.evaluate`'s: the same object encodes
            # each text once, in the same batches, for both (equal vectors, equal ranks)
            identity, _ = identity_and_reason(model, revision)
            # under a name of its own, so a name the user registered elsewhere is left alone
            key = f"pyterrier:{self.name}:{id(model):x}"
            found = registry.current().with_object(adhoc.PythonModel(key, model, identity, self.name, "instructed",
                                                                      templates))
        self.kit = kit
        self.keep_scores = keep_scores
        settings = RunSettings(model=key, dataset=kit.collection.name, profile=kit.profile, protocol=kit.protocol,
                               variant=kit.variant, queries=kit.queries)
        bound = bind(settings, kit.collection, None, found)  # prepared here, never stored
        self.scorer, self.candidates, _ = prepare(bound)
        self.queries = {q.qid: q for q in bound.queries}

    def query(self, qid: str, text: str, instruction=None) -> Query:
        """The kit's query `qid` with the frame's text and instruction (None: the frame has no
        ``instruction`` column, the kit's is kept; NaN: no instruction)."""
        if qid not in self.queries:
            raise DataError(f"query {qid}", f"is not one of this dataset's queries ({self.kit!r}); rank its topics "
                            "(kit.get_topics())")
        if not isinstance(text, str):
            raise DataError(f"query {qid}", f"the frame's query is {text!r}, not a text; give each row its query text")
        query = self.queries[qid]
        if instruction is None:
            return replace(query, text=text)
        return replace(query, text=text, instruction=instruction if isinstance(instruction, str) else "")

    def score(self, queries: list[Query], documents: list[list] | None) -> list[dict[str, float]]:
        """Each query's scores, as the runner scores a run (`evalkit.pipeline.runner.compute`): its
        documents (None: each query's candidates, or the whole corpus, top `KEEP`), held to the rule
        of every run `evalkit.evaluate` stores (`evalkit.data.runstore.check_run`: a ranking for every
        query, none empty, finite scores), so a NaN is the line `evaluate` gives, never a rank."""
        if documents is None and self.candidates is None:
            collection = self.kit.collection
            found = rank_corpus(self.scorer, queries, whole_corpus(collection), KEEP, collection.exclude)
            scored = [found.get(q.qid, {}) for q in queries]
        else:
            lists = [self.candidates[q.qid] for q in queries] if documents is None else documents
            score_many = getattr(self.scorer, "score_many", None)  # scorers that rank many queries at once
            if score_many is not None:
                scored = list(score_many(queries, lists))
            else:
                scored = [self.scorer.score(q, docs) for q, docs in zip(queries, lists)]
        if len(scored) != len(queries):  # zip would drop the queries without a ranking
            raise DataError(f"model {self.name}", f"gave {len(scored)} rankings for {len(queries)} queries; return "
                            "one ranking per query")
        check_run({q.qid: dict(s) for q, s in zip(queries, scored)})
        return scored

    def ranking(self, scores: Mapping[str, float]) -> list[tuple[str, float]]:
        """(docno, score) best first by the kit's tie rule; the kit's scores or the model's."""
        shown = scores if self.keep_scores else rank_scores({"q": scores})["q"]
        return [(doc, float(shown[doc])) for doc in ranked(scores)]


def _instruction_of(row: Mapping, columns) -> object:
    """The row's instruction (NaN where the frame leaves it empty), None without the column."""
    if "instruction" not in columns:
        return None
    return math.nan if row["instruction"] is None else row["instruction"]


class _FromTopics(pt.Transformer):
    """Topics in (a query frame holding `needs` besides ``qid``), a result frame out: the topics'
    columns then `RESULT_COLUMNS`."""

    needs: tuple[str, ...] = ()

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        pt.validate.query_frame(input_columns, list(self.needs))
        return [*input_columns, *RESULT_COLUMNS]

    def topics(self, inp: pd.DataFrame) -> list[str]:
        """The columns of `inp`, once it is checked as this transformer's topics."""
        pt.validate.query_frame(inp, list(self.needs))
        return list(inp.columns)


class KitCandidates(_FromTopics):
    """Topics in, each topic's candidate list as the dataset's protocol gives it out (`KitDataset.candidates`)."""

    def __init__(self, kit: KitDataset) -> None:
        self.kit = kit

    def __repr__(self) -> str:
        return f"KitCandidates({self.kit.collection.name}, {self.kit.protocol})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        columns, known = self.topics(inp), set(self.kit.qids)
        out = []
        for row in inp.to_dict("records"):
            qid = str(row["qid"])
            if qid not in known:
                raise DataError(f"query {qid}", f"is not one of this dataset's queries ({self.kit!r}); give its topics "
                                "(kit.get_topics())")
            docs = [d.doc_id for d in self.kit.judged.candidates_of(qid)]
            out += [{**row, "qid": qid, "docno": doc, "score": float(len(docs) - i), "rank": i}
                    for i, doc in enumerate(docs)]
        return pd.DataFrame(out, columns=[*columns, *RESULT_COLUMNS])


class KitRetriever(_FromTopics):
    """Topics in, each topic's candidates ranked by a kit model out (`KitModel`)."""

    needs = ("query",)

    def __init__(self, model: KitModel) -> None:
        self.model = model

    def __repr__(self) -> str:
        return f"KitRetriever({self.model.name})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        columns = self.topics(inp)
        if not len(inp):
            return pd.DataFrame(columns=[*columns, *RESULT_COLUMNS])
        rows = inp.to_dict("records")
        if len({row["qid"] for row in rows}) < len(rows):
            raise DataError("topics", "the topics name a query twice; give each qid once")
        queries = [self.model.query(str(row["qid"]), row["query"], _instruction_of(row, columns)) for row in rows]
        scored = self.model.score(queries, None)
        out = [{**row, "docno": doc, "score": score, "rank": rank}
               for row, scores in zip(rows, scored)
               for rank, (doc, score) in enumerate(self.model.ranking(scores))]
        return pd.DataFrame(out, columns=[*columns, *RESULT_COLUMNS])


class KitReranker(pt.Transformer):
    """A result frame in, each query's documents rescored by a kit model and ranked by the kit's
    tie rule out (`KitModel`); the frame's other columns are kept."""

    def __init__(self, model: KitModel) -> None:
        self.model = model

    def __repr__(self) -> str:
        return f"KitReranker({self.model.name})"

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        pt.validate.result_frame(input_columns, ["query"])
        kept = [c for c in input_columns if c not in ("score", "rank")]
        return [*kept, "score", "rank"]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, ["query"])
        kept = [c for c in inp.columns if c not in ("score", "rank")]
        if not len(inp):
            return pd.DataFrame(columns=[*kept, "score", "rank"])
        documents = self.model.kit.collection.documents
        groups: dict[str, list[dict]] = {}
        given: Run = {}
        for row in inp[kept].to_dict("records"):
            qid, doc = str(row["qid"]), str(row["docno"])
            if doc not in documents:
                raise DataError(f"query {qid}", f"document {doc} is not in {self.model.kit.collection.name}; rerank "
                                "the collection's documents")
            add_score(given, "reranker input", qid, doc, 0.0)  # a docno twice: a run file's line
            groups.setdefault(qid, []).append({**row, "qid": qid, "docno": doc})
        check_protocol_run(given, self.model.kit.collection, self.model.kit.protocol, source="reranker input")
        queries = [self.model.query(qid, group[0]["query"], _instruction_of(group[0], kept))
                   for qid, group in groups.items()]
        scored = self.model.score(queries, [[documents[r["docno"]] for r in group] for group in groups.values()])
        out = []
        for group, scores in zip(groups.values(), scored):
            by_doc = {r["docno"]: r for r in group}
            out += [{**by_doc[doc], "score": score, "rank": rank}
                    for rank, (doc, score) in enumerate(self.model.ranking(scores))]
        return pd.DataFrame(out, columns=[*kept, "score", "rank"])
