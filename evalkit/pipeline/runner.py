"""`evalkit run`: rank one collection's queries with one model, variant, prompt and protocol.

Every model family goes through this one path on every collection:

    collection (evalkit.datasets) -> candidates per query (protocol) -> model.score -> run
    -> verified run store (evalkit.data.runstore) -> evaluation (evalkit.evaluation.evaluate)

Protocols, for any collection:
- ``pool``: each query's given candidate list (CSFCube's judged pool, FollowIR's top-ranked
  list); a collection without lists is ranked over its whole corpus (top `KEEP` kept);
- ``released``: the pool protocol with nothing excluded (`Collection.including_excluded`):
  CSFCube's pools as released, seed 8781666 ranked and judged in its own background and
  result pools, as every published CSFCube row was computed;
- ``pooled``: a first-stage model ranks the whole corpus and keeps the top ``depth`` for
  each query; the model reranks them; unjudged documents count as non-relevant;
- ``full``: a corpus file streamed by the collection's reader (CSFCube's ~800k abstracts,
  `Collection.read_corpus`), the first stage's top ``depth`` reranked.

Whole corpora (a pool without lists, the pooled and full first stages) all go through
`evalkit.retrieval.corpus.rank_corpus`: one batched index search for the embedding models and BM25,
equal to scoring every document and ranking by the tie rule.

Except under ``released``, a query's excluded document (CSFCube's seed) is never a
candidate and is not judged (`protocol_collection`).

A run is bound once (`bind` -> `BoundRun`: the model's spec, a user's Python object attached,
the first stage and its depth, the queries, the run-store key and folder, each computed once
from a `evalkit.models.registry.Registry` value) and obtained through one entry point
(`obtain`), whose `Reuse` policy says whether a stored run may stand for it and whose `Failure`
policy whether a run that cannot be made raises or says why (`NotRun`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from functools import cache
from pathlib import Path
from types import ModuleType

from evalkit import datasets, encoders, llm, models, retrieval
from evalkit.core import hashing, progress
from evalkit.core.errors import DataError, KitError, MissingPrerequisite, RequestError
from evalkit.core.hashing import files_sha256
from evalkit.core.version import __version__
from evalkit.data import collection as data_collection
from evalkit.data import protocols as data_protocols
from evalkit.data.collection import Collection, Document, Query, select_variant
from evalkit.data.protocols import POOL_PROTOCOLS, check_protocol, protocol_collection
from evalkit.data.runs import Run, ranked
from evalkit.data.runstore import check_owner, is_verified, load_verified, run_folder, write_run
from evalkit.llm.templates import TEMPLATES_FILE
from evalkit.models import registry
from evalkit.models import registry as models_registry  # `bind` has a parameter named registry
from evalkit.models.base import Scorer, index_documents
from evalkit.models.family import NEEDS
from evalkit.models.registry import ModelSpec, Registry
from evalkit.pipeline import prerequisites
from evalkit.pipeline import settings as pipeline_settings

# a run's settings; the runner's callers import them from here too
from evalkit.pipeline.settings import (
    EXECUTION_FIELDS,
    RunSettings,
    check_execution,
    check_index_dtype,
    check_stage,
    corpus_identity,
    instructions_identity,
)
from evalkit.retrieval.corpus import CHUNK, Corpus, documents_of, rank_corpus
from evalkit.retrieval.executors import device_part, executor_for

KEEP = 1000  # documents kept per query when a whole corpus is ranked (as BEIR runs)


def with_settings_instructions(settings: RunSettings, collection: Collection) -> Collection:
    """The collection under the run's instruction file (its variants), or as it is."""
    return collection if settings.instructions is None else collection.with_instructions(Path(settings.instructions))


def with_prompt(text: str, prompt: str | None) -> str:
    """The query text with a prompt appended after one space (Promptriever's and FollowIR's rule)."""
    return f"{text} {prompt}" if prompt else text


def check_settings(settings: RunSettings, model: ModelSpec, first: ModelSpec | None,
                   collection: Collection) -> None:
    """Every setting checked before any model is built or anything is scored (`bind`, once a run;
    the protocol first, by `bind`): `model` and `first` are the model's and the first stage's specs,
    `collection` the run's (`run_collection`)."""
    select_variant(collection, settings.variant)  # the request's rules, as every front end's
    check_stage(settings.protocol, settings.first_stage, settings.depth)  # `check_run_request`'s rule too
    if settings.protocol == "full" and not settings.corpus:
        raise RequestError("protocol", datasets.missing_corpus(settings.dataset), value="full")
    if settings.protocol == "full" and collection.read_corpus is None:
        raise RequestError("protocol", f"{collection.name} has no corpus file for the full protocol; use "
                                       "{protocol:pool} or {protocol:pooled}", value="full")
    check_index_dtype(settings.index_dtype)
    check_execution(settings.executor, settings.workers)
    missing = sorted(registry.needs(model) - capabilities(collection))
    if missing:
        raise RequestError("model",
                           f"model {settings.model} cannot rank {collection.name}: it needs {', '.join(missing)} "
                           f"({NEEDS[missing[0]]}); choose another model")
    missing = sorted(registry.needs(first) - capabilities(collection)) if first is not None else []
    if missing:
        raise RequestError("first_stage", f"{first.name} cannot rank {collection.name}: it needs "
                                          f"{', '.join(missing)} ({NEEDS[missing[0]]}); choose another first stage",
                           value=first.name)


def capabilities(collection: Collection) -> set[str]:
    found = {"qrels"} if collection.qrels else set()
    if collection.has_sentences():
        found.add("sentences")
    if collection.has_facet_labels():
        found.add("facets")
    return found


def run_collection(settings: RunSettings, collection: Collection) -> Collection:
    """The collection as the run sees it: under its instruction file (`with_settings_instructions`)
    and as its protocol ranks it (`evalkit.data.protocols.protocol_collection`: ``released``
    excludes nothing). `bind` computes it once; every step of the run reads it."""
    return protocol_collection(with_settings_instructions(settings, collection), settings.protocol)


def queries_of(settings: RunSettings, collection: Collection) -> list[Query]:
    """The selected queries under the run's variant and prompt, in collection order."""
    return selected_queries(settings, with_settings_instructions(settings, collection))


def selected_queries(settings: RunSettings, collection: Collection) -> list[Query]:
    """`queries_of` on a collection already under the run's instruction file (`run_collection`)."""
    qids = list(settings.queries) if settings.queries is not None else list(collection.queries)
    unknown = [q for q in qids if q not in collection.queries]
    if unknown:
        raise RequestError("queries", f"{collection.name} has no query {unknown[0]}; list existing query ids")
    chosen = [collection.query(qid, settings.variant) for qid in qids]
    return [replace(q, text=with_prompt(q.text, settings.prompt)) for q in chosen]


def whole_corpus(collection: Collection) -> Corpus:
    """The collection's documents as one corpus (in memory, keyed by their checksum). Where the
    collection gives candidate lists, its pooled documents come first, in the order a run over every
    query meets them (queries in collection order, each one's candidates), in batches of the
    embedding cache's `CHUNK` ending with them, then the others: the index's batches are those in
    which a pool run encoded the documents through the cache, so its vectors are the same bits."""
    if collection.candidates is None:
        return Corpus.of_documents(list(collection.documents.values()), collection.name)
    pooled = pooled_documents({qid: collection.candidates_of(qid) for qid in collection.queries})
    ids = {d.doc_id for d in pooled}
    rest = [d for doc, d in collection.documents.items() if doc not in ids]
    return Corpus.of_documents([*pooled, *rest], collection.name, CHUNK, (len(pooled),))


def pooled_documents(candidates: Mapping[str, Sequence[Document]]) -> list[Document]:
    """The documents of candidate lists, each once, in the order the lists meet them: what a run
    prepares (`prepare`), and the order in which a pool collection's index holds them (`whole_corpus`)."""
    return list({d.doc_id: d for documents in candidates.values() for d in documents}.values())


def candidates_for(settings: RunSettings, collection: Collection, queries: Sequence[Query],
                   first_spec: ModelSpec | None, depth: int | None,
                   executor=None) -> tuple[dict[str, list[Document]] | None, dict]:
    """Candidates per query under the protocol (None: a pool protocol over a whole corpus, which
    the model ranks itself, `KEEP` kept), and the protocol's description for the sidecar; on the
    pooled and full protocols `first_spec` ranks the corpus and keeps the top `depth`
    (`first_stage_of`), its corpus encoded and searched by `executor` (default in-process). `collection`
    is the run's, as its protocol ranks it (`run_collection`)."""
    if settings.protocol in POOL_PROTOCOLS:
        if collection.candidates is None:
            return None, {"protocol": settings.protocol, "corpus_size": len(collection.documents), "keep": KEEP}
        return {q.qid: collection.candidates_of(q.qid) for q in queries}, {"protocol": settings.protocol}
    name = first_spec.name
    first = registry.build(first_spec, collection)
    described = {"protocol": settings.protocol, "first_stage": name, "first_stage_model": first.describe(),
                 "depth": depth}
    if settings.protocol == "pooled":
        corpus = whole_corpus(collection)
        found = first_stage(first, queries, corpus, depth, collection.exclude, settings.index_dtype, executor)
        return ({qid: [collection.documents[d] for d in hits] for qid, hits in found.items()},
                {**described, "corpus_size": len(collection.documents)})
    if not getattr(first, "can_search", lambda excluding: False)(True):  # a file corpus is never scored whole
        raise RequestError("first_stage", f"the full protocol's first stage must be an embedding model; {name} is not")
    corpus = Corpus.of_file(Path(settings.corpus), collection.read_corpus)
    found = first_stage(first, queries, corpus, depth, collection.exclude, settings.index_dtype, executor)
    texts = documents_of(corpus, {d for hits in found.values() for d in hits})
    return ({qid: [texts[d] for d in hits] for qid, hits in found.items()},
            {**described, "corpus": corpus.name, "corpus_sha256": corpus.key,
             "corpus_size": first.corpus_index(corpus, settings.index_dtype, executor).meta["rows"]})


def first_stage(first: Scorer, queries: list[Query], corpus: Corpus, depth: int, exclude,
                index_dtype: str = "float32", executor=None) -> dict[str, list[str]]:
    """The first stage of the pooled and full protocols: each query's top `depth` document ids of
    `corpus`, best first (`evalkit.retrieval.corpus.rank_corpus`; its excluded document left out)."""
    found = rank_corpus(first, queries, corpus, depth, exclude, index_dtype, executor)
    return {qid: ranked(scores) for qid, scores in found.items()}


Candidates = dict[str, list[Document]]


def prepare(bound: BoundRun, executor=None) -> tuple[Scorer, Candidates | None, dict]:
    """The model, each query's candidates under the protocol (None when the model ranks the whole
    corpus itself) and the protocol's description; every candidate prepared (e.g. encoded) once;
    whole corpora encoded and searched by `executor` (default in-process).

    A run over every query of its collection (no ``queries`` chosen) scores the collection's
    documents by their vectors in the collection's index (`evalkit.models.base.index_documents`):
    the pool, pooled and hybrid runs of a study then share one encoding of the documents, made in
    batches that are a function of the corpus alone. A run over some queries (a seed's explore
    page, a smoke run) encodes only its candidates, through the embedding cache, as it did before
    (a few hundred texts instead of the whole collection's)."""
    candidates, protocol = candidates_for(bound.settings, bound.collection, bound.queries, bound.first_stage,
                                          bound.depth, executor)
    scorer = registry.build(bound.model, bound.collection)
    use_workers = getattr(scorer, "use_workers", None)  # an LLM the kit serves: one vLLM replica per worker
    if use_workers is not None and bound.settings.executor == "ray":
        use_workers(bound.settings.workers or 1, "ray")  # (on the cluster the executor joined; left when it is)
    if candidates is not None:
        if bound.settings.protocol != "full" and bound.settings.queries is None:
            index_documents(scorer, whole_corpus(bound.collection), executor)
        scorer.prepare(pooled_documents(candidates))
    return scorer, candidates, protocol


def compute(bound: BoundRun) -> Path:
    """Run the bound model over its queries and store the run (`write_run`); returns its folder.
    Whole corpora are encoded and searched by the run's executor (`executor_for`: in this process,
    or on a Ray cluster it starts or joins and leaves), recorded in the sidecar as ``execution``."""
    settings, queries = bound.settings, bound.queries
    with executor_for(settings.executor, settings.workers) as executor:
        scorer, candidates, protocol, run = _scored(bound, executor)
        execution = executor.describe()
    for note in execution.get("notes", []):
        print(f"evalkit: note: {settings.run_name}: {note}", file=sys.stderr)
    accounting = getattr(scorer, "accounting", None)
    model_spec = bound.model
    sidecar = {
        **bound.key,
        "label": model_spec.label,
        "role": model_spec.role,
        "family": model_spec.family,
        "model_settings": scorer.describe(),
        "instructions": sorted({q.instruction for q in queries}),
        **protocol,
        "execution": execution,  # where it ran: no part of the key but its device kind (`on_device`)
    }
    return write_run(bound.folder, run, sidecar, accounting() if accounting else None)


def _scored(bound: BoundRun, executor) -> tuple[Scorer, Candidates | None, dict, Run]:
    """The model, its candidates, the protocol's description and the run of `compute`."""
    settings, collection, queries = bound.settings, bound.collection, bound.queries
    scorer, candidates, protocol = prepare(bound, executor)
    if candidates is None:  # the whole corpus, top KEEP: one batched search where the model has an index
        run: Run = rank_corpus(scorer, queries, whole_corpus(collection), KEEP, collection.exclude,
                               settings.index_dtype, executor)
    else:
        run = {}
        score_many = getattr(scorer, "score_many", None)  # scorers that rank many queries at once (LLM rerankers)
        together = iter(score_many(queries, [candidates[q.qid] for q in queries])) if score_many else None
        for query in progress.bar(queries, desc=f"scoring {settings.run_name} ({settings.protocol})", unit="query"):
            run[query.qid] = next(together) if together else scorer.score(query, candidates[query.qid])
    return scorer, candidates, protocol, run


def sidecar_key(settings: RunSettings, model_spec: ModelSpec, collection: Collection) -> dict:
    """What a stored run must match to be reused: the settings (an instruction file and a corpus
    file by name and sha256, never by path: a corpus edited in place is a new run), the model's
    whole registry entry, the identity of user code behind it (`registry.identity`) and the data.
    Known before any model is built (`bind`, once a run)."""
    run_settings = {k: v for k, v in asdict(settings).items() if k not in EXECUTION_FIELDS}  # time, not numbers
    if settings.instructions is not None:  # the file by name and content, not by its path on this machine
        run_settings["instructions"] = instructions_identity(settings.instructions)
    if settings.corpus is not None:  # the full protocol's corpus file by name and content, as the instructions
        run_settings["corpus"] = corpus_identity(settings.corpus)
    return {"run": settings.run_name, "dataset": collection.name, "data_sha256": collection.identity,
            "run_settings": run_settings, "model_entry": registry.entry(model_spec), "kit_version": __version__,
            "scoring_code_sha256": scoring_code_digest(), "model_identity": registry.identity(model_spec)}


# The code and configuration that turn a query into scores, declared as what this module imports
# (so the layer contract sees every entry, and a moved or renamed module fails here at import
# instead of dropping silently out of the digest): a package stands for every file of its folder,
# a module for its file, a path for that configuration file. The collection's data structures
# and protocols, the hashing behind every key, every adapter, the runner and its settings, the
# retrieval machinery, every model, encoder and LLM module, the instruction texts and LLM
# templates.
SCORING_CODE: tuple[ModuleType | Path, ...] = (
    data_collection, data_protocols, hashing, datasets, sys.modules[__name__], pipeline_settings, retrieval,
    models, encoders, llm, datasets.csfcube_variants.INSTRUCTIONS_FILE, TEMPLATES_FILE)
SCORED_SUFFIXES = (".py", ".yaml", ".csv")  # the files of a package folder that count


def scoring_files(declared=SCORING_CODE) -> list[Path]:
    """The files behind `declared` (`SCORING_CODE`), sorted: a package's every .py, .yaml and .csv
    file under its folder, a module's file, a path as it is."""
    found: set[Path] = set()
    for entry in declared:
        if isinstance(entry, Path):
            found.add(entry.resolve())
        elif hasattr(entry, "__path__"):  # a package: its folder
            found |= {p.resolve() for folder in entry.__path__ for p in Path(folder).rglob("*")
                      if p.is_file() and p.suffix in SCORED_SUFFIXES}
        else:
            found.add(Path(entry.__file__).resolve())
    return sorted(found)


@cache
def scoring_code_digest() -> str:
    """sha256 of the code and configuration that turn a query into scores (`SCORING_CODE`), each
    file named by its path in the package: a run made by other scoring code is never reused
    (embeddings and LLM judgments stay cached, so a rerun is cheap)."""
    return code_digest(SCORING_CODE, Path(__file__).resolve().parents[1])  # names relative to the package


def code_digest(declared, root: Path) -> str:
    """sha256 over the files behind `declared` (`scoring_files`), each named by its path under `root`."""
    files = scoring_files(declared)
    return files_sha256(files, [str(p.relative_to(root)) for p in files])


@dataclass(frozen=True)
class NotRun:
    """A run that was not made, and why ("not run: <reason>")."""

    reason: str


def unavailable(bound: BoundRun) -> tuple[str, str] | None:
    """(reason, fix) when a prerequisite of the run is missing (`evalkit.pipeline.prerequisites`: the model's
    own, its first stage's, the protocol's first stage on pooled and full), else None."""
    specs = [bound.model] + ([] if bound.first_stage is None else [bound.first_stage])
    found = list({(m.reason, m.fix): m for spec in specs for m in prerequisites.missing(spec)}.values())
    if not found:
        return None
    return "; ".join(m.reason for m in found), "; ".join(m.fix for m in found)


@dataclass(frozen=True)
class BoundRun:
    """One run, bound once (`bind`): its settings, the collection as the run sees it
    (`run_collection`: under its instruction file, with its protocol's exclusions), the model's
    spec (its family and first stage resolved by the registry it was bound with, a Python object
    attached, `evalkit.models.adhoc.PythonModel`), the first stage's spec and depth
    (pooled and full; None on the pool protocols), the selected queries, the key a stored run must
    match (`sidecar_key`; its ``model_identity`` None: never reused) and the run's folder. Every
    step of the run reads these; none is looked up again."""

    settings: RunSettings
    collection: Collection
    model: ModelSpec
    first_stage: ModelSpec | None
    depth: int | None
    queries: tuple[Query, ...]
    key: dict
    folder: Path | None  # None: bound to be prepared only (`prepare`), never stored

    @property
    def reusable(self) -> bool:
        """Whether a stored run may stand for this one: something pins the model's code and files."""
        return self.key["model_identity"] is not None


def bind(settings: RunSettings, collection: Collection, runs_dir: Path | None,
         registry: Registry | None = None) -> BoundRun:
    """The run of `settings` on `collection` in the store `runs_dir`, bound: its registry entries read
    from `registry` (default `evalkit.models.registry.current`: the registry file and the objects
    `evalkit.register_model` made rankable by name), every setting checked (`check_settings`), its
    queries, key and folder computed, each once. Nothing is built or scored. `runs_dir` None: a run
    prepared only (`prepare`, the PyTerrier transformer), never stored."""
    check_protocol(settings.protocol)  # the one rule of every front end, before any registry lookup
    settings = as_collections_variant(settings, collection)
    found = registry if registry is not None else models_registry.current()
    model = found.spec(settings.model, settings.profile)
    first, depth = first_stage_of(settings, found)
    seen = run_collection(settings, collection)
    check_settings(settings, model, first, seen)
    # the run name must round-trip through a TREC file, stored or not
    folder = run_folder(runs_dir if runs_dir is not None else Path(), settings, collection)
    folder = folder if runs_dir is not None else None
    key = sidecar_key(settings, model, collection)  # the data as given: its identity, whatever the protocol
    return BoundRun(settings, seen, model, first, depth, tuple(selected_queries(settings, seen)), key, folder)


def as_collections_variant(settings: RunSettings, collection: Collection) -> RunSettings:
    """`settings` without its instruction file when the file's variant asks every query what the
    collection's own variant of that name asks (the same instruction and text: a user's file that
    copies the kit's variants and adds its own): the run is the collection's, and a stored one is
    reused. Otherwise `settings` as given."""
    if settings.instructions is None or settings.variant not in collection.variants:
        return settings
    try:
        given = collection.with_instructions(Path(settings.instructions))
        if settings.variant not in given.variants:
            return settings  # the file's own rule refuses it later, in one line
        same = all(collection.query(q, settings.variant) == given.query(q, settings.variant)
                   for q in collection.queries)
    except KitError:
        return settings  # a file the kit refuses: refused where it is read, in its own line
    return replace(settings, instructions=None) if same else settings


def first_stage_of(settings: RunSettings, registry: Registry) -> tuple[ModelSpec | None, int | None]:
    """pooled and full: (the first stage's spec, the documents it keeps per query), ``first_stage``
    and ``depth`` or the profile's; (None, None) on the pool protocols, which rank each query's
    given candidates."""
    if settings.protocol in POOL_PROTOCOLS:
        return None, None
    name = settings.first_stage or registry.profile_value(settings.profile, "first_stage")
    return registry.spec(name, settings.profile), settings.depth or registry.profile_value(settings.profile, "depth")


class Reuse(Enum):
    """Whether `obtain` may stand a stored run for the bound one."""

    IF_VERIFIED = "if-verified"  # a stored complete, verified, matching run; else one computed and stored
    NEVER = "never"  # always computed and stored (what a stored one of the same key is replaced by)
    ONLY = "only"  # the stored one or nothing (None): nothing is computed


class Failure(Enum):
    """What `obtain` does when the run cannot be made."""

    RAISE = "raise"  # the error as it is
    REASON = "reason"  # a missing prerequisite or a kit error (a server that dies, weights not fetched): NotRun
    STRICT = "strict"  # a missing prerequisite: a KitError naming it and its fix, before anything; errors raise


@dataclass(frozen=True)
class Obtained:
    """A bound run's folder in the store, and its run (None where `obtain` was asked not to read it)."""

    folder: Path
    run: Run | None


def obtain(bound: BoundRun, reuse: Reuse = Reuse.IF_VERIFIED, *, read: bool = True,
           failure: Failure = Failure.RAISE) -> Obtained | NotRun | None:
    """The one way to a run: a stored complete, verified, matching run (nothing is written), else
    (`reuse` allowing) a fresh one, stored and read back verified. A model whose user code nothing
    pins (`BoundRun.reusable` false) is always run again. `read` false: the folder only (`evalkit
    run`): a stored run verified by its sidecar and sha256s is not parsed. None: `Reuse.ONLY`
    found none. NotRun: `Failure.REASON`, why the run was not made."""
    if failure is not Failure.RAISE:
        missing = unavailable(bound)
        if missing is not None:
            if failure is Failure.STRICT:
                raise MissingPrerequisite(f"{bound.settings.run_name}: {missing[0]}", missing[1])
            return NotRun(f"not run: {missing[0]}")
    try:
        return _obtain(bound, reuse, read)
    except KitError as exc:
        if failure is not Failure.REASON:
            raise
        return NotRun(f"not run: {' '.join(str(exc).splitlines())}")


def on_device(bound: BoundRun) -> BoundRun:
    """`bound`, its key naming the device its documents are encoded on where the run's executor
    lets its workers choose it (`evalkit.retrieval.executors.device_part`: a Ray cluster of GPU
    workers; asked before the store is, so such a run is never answered by, nor stored as, the
    run of the same settings encoded on CPUs)."""
    if bound.settings.executor == "local":
        return bound
    part = device_part(executor_for(bound.settings.executor, bound.settings.workers))
    return replace(bound, key={**bound.key, **part}) if part else bound


def _obtain(bound: BoundRun, reuse: Reuse, read: bool) -> Obtained | None:
    if bound.folder is None:
        raise DataError(bound.settings.run_name, "bound without a run store; bind it with the runs folder")
    bound = on_device(bound)
    folder, key = bound.folder, {"device": None, **bound.key}  # a stored run of another device never matches
    if reuse is not Reuse.NEVER and bound.reusable:
        if not read and is_verified(folder, key):
            return Obtained(folder, None)
        run = load_verified(folder, key) if read else None
        if run is not None:
            return Obtained(folder, run)
    if reuse is Reuse.ONLY:
        return None
    check_owner(folder, key)  # before any work: a folder of another run is never replaced (write_run checks again)
    folder = compute(bound)
    run = load_verified(folder, key)
    if run is None:
        raise DataError(folder, "the run just written does not read back verified; "
                        "another writer may have replaced it: run again")
    return Obtained(folder, run)

