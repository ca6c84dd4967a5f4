"""The one collection interface every dataset adapter produces and every generic module reads.

A `Collection` is plain data (BEIR-style dicts of records): documents, queries carrying
their instruction, graded qrels with the collection's own relevance level, and the
optional parts some collections have:

- ``candidates``: a given list to rerank per query (CSFCube's judged pools, FollowIR's
  top-ranked lists); without it a model ranks the whole corpus;
- ``pairs``: for p-MRR, query i -> query i' with the same information need under
  another instruction (CSFCube: the other annotated facet of a seed, both ways;
  FollowIR: original -> changed instruction);
- ``folds``: named dev/test splits of the query ids (CSFCube's official two folds; a
  dataset's dev and test splits);
- ``groups``: query -> its instances (InstructIR's robustness@k);
- ``strata``: query -> a label the tables report separately (CSFCube's facets);
- ``exclude``: query -> a document never ranked for it (CSFCube's seed paper), explicit
  rather than BEIR's silent deletion of documents whose id equals the query id; an excluded
  document is not judged either (`judged`), so no measure counts a document no model could
  rank; `including_excluded` gives the collection as released, nothing excluded;
- ``read_corpus``: a reader of a corpus file for the full protocol (CSFCube's ~800k abstracts),
  so the generic runner streams it without knowing the format;
- ``variants``: the instruction variants a collection defines (CSFCube's Base, Generic,
  Definition, Paraphrases, Aspect subset) and the function that makes a variant's query;
  ``instructions_from`` reads a user's instruction file into other variants (CSFCube's
  facet instructions), see `with_instructions`;
- ``table``: the default table, shaped by a discount and a cut-off (`DefaultTable`: CSFCube's
  paper table, nDCG@k with its discount, AP, RR, P@k, R@k, p-MRR); without one the default
  measures are the headline ``measures``;
- ``read_runs``: a reader of a folder of the collection's own ranked files, a run picked by name
  (CSFCube's official ``test-pid2pool-csfcube-NAME-FACET-ranked.json``), so a run given as such a
  folder is read without the run input knowing the format.

A collection's `identity` keys its runs in the run store (``data_sha256``) and names their folder
(`store_name`, with the name; CSFCube's folder is its plain name, `named_by_kit`): the adapter's
``checksum`` when it gives one (CSFCube's manifest sha256, a BEIR folder's file sha256), else a
sha256 of the content itself (`content_sha256`), so a run of a user's collection is never
reused after its documents, queries, instructions, qrels or candidate lists change.

Nothing here knows any dataset; adapters live in `evalkit.datasets`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from evalkit.core.errors import DataError, DeclarationError, KitError, RequestError
from evalkit.core.names import labelled, name_part

Qrels = dict[str, dict[str, int]]
BASE = "base"


@dataclass(frozen=True)
class Sentence:
    text: str
    label: str | None = None  # e.g. CSFCube's facet (background, method, result, other)


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    sentences: tuple[Sentence, ...] = ()  # the body split into (labelled) sentences, where known

    @property
    def full_text(self) -> str:
        """Title and body joined by a space: what text models read."""
        return f"{self.title} {self.text}".strip()

    def labelled(self, label: str) -> tuple[str, ...]:
        """The sentences labelled `label` (e.g. a CSFCube facet)."""
        return tuple(s.text for s in self.sentences if s.label == label)


@dataclass(frozen=True)
class Query:
    """What a model scores against: the query text and the instruction it carries.

    `seed` is the query document of query-by-document collections (CSFCube), `facet` the
    aspect its instruction names; both are None elsewhere.
    """

    qid: str
    text: str
    instruction: str = ""
    seed: Document | None = None
    facet: str | None = None

    @property
    def focus_sentences(self) -> tuple[str, ...]:
        """The seed's sentences of the requested facet, else all its sentences (multi-vector models)."""
        if self.seed is None:
            return ()
        sentences = self.seed.labelled(self.facet) if self.facet else ()
        return sentences or tuple(s.text for s in self.seed.sentences)

    @property
    def facet_text(self) -> str:
        """The seed's sentences of the requested facet joined, else the whole seed (the
        Aspect-subset query text)."""
        if self.seed is None:
            raise DataError(f"query {self.qid}", "has no seed document; facet queries need a query-by-document "
                            "collection such as CSFCube")
        return " ".join(self.seed.labelled(self.facet)) if self.facet and self.seed.labelled(self.facet) \
            else self.seed.full_text


@dataclass(frozen=True)
class Fold:
    dev: tuple[str, ...]
    test: tuple[str, ...]


@dataclass(frozen=True)
class DefaultTable:
    """A collection's default table (what is evaluated when no measures are named), shaped by a
    discount and a cut-off: each of `measures` is a measure name in which ``{k}`` stands for the
    cut-off and ``{ndcg}`` for the nDCG family the discount names (the evaluation layer's
    ``DISCOUNTS``: ``csfcube`` the release's ``nDCG_csfcube``, ``trec`` trec_eval's ``nDCG``);
    `k` and `discount` are the defaults."""

    measures: tuple[str, ...]
    k: int
    discount: str

    def __post_init__(self) -> None:
        declared = "default table"
        if not self.measures or not all(isinstance(m, str) and m for m in self.measures):
            raise DeclarationError(declared, "give its measures as a tuple of names")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise DeclarationError(declared, f"k {self.k!r} must be a positive whole number")
        if not isinstance(self.discount, str) or not self.discount:
            raise DeclarationError(declared, "give its default discount (e.g. trec)")
        for name in self.measures:
            try:
                name.format(k=1, ndcg="nDCG")
            except (KeyError, IndexError, ValueError):
                raise DeclarationError(declared, f"measure {name!r} may hold only {{k}} and {{ndcg}}") from None

    def names(self, ndcg: str, k: int | None = None) -> list[str]:
        """The table's measure names with `ndcg` (an nDCG family) and the cut-off `k` (default `k`)."""
        return [name.format(k=self.k if k is None else k, ndcg=ndcg) for name in self.measures]


def _document_record(document: Document) -> list:
    """A document as `Collection.content_sha256` feeds it: id, title, body and labelled sentences."""
    return [document.doc_id, document.title, document.text, [[s.text, s.label] for s in document.sentences]]


def _base_only(query: Query, variant: str) -> Query:
    if variant != BASE:
        raise RequestError("variant", f"this collection defines no instruction variant {variant!r}; use {BASE}")
    return query


@dataclass(frozen=True)
class Collection:
    name: str
    documents: Mapping[str, Document]
    queries: Mapping[str, Query]
    qrels: Mapping[str, Mapping[str, int]]
    relevance_level: int = 1
    checksum: str = ""  # the adapter's sha256 of its data, if it gives one; "" -> the content's (`identity`)
    candidates: Mapping[str, tuple[str, ...]] | None = None
    pairs: Mapping[str, str] = field(default_factory=dict)
    folds: Mapping[str, Fold] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    strata: Mapping[str, str] = field(default_factory=dict)
    exclude: Mapping[str, str] = field(default_factory=dict)
    variants: tuple[str, ...] = (BASE,)
    make_variant: Callable[[Query, str], Query] = _base_only
    measures: tuple[str, ...] = ("nDCG@10",)  # the collection's headline measures (ir_measures names)
    table: DefaultTable | None = None  # the default table shaped by a discount and k; None: `measures`
    read_runs: Callable[[Path, str], Mapping[str, Mapping[str, float]]] | None = None  # (folder, name) -> a run
    read_corpus: Callable[[Path], Iterator[Document]] | None = None  # the full protocol's corpus file reader
    # a user's instruction file -> (variants, make_variant); None: the collection takes no such file
    instructions_from: Callable[[Path], tuple[tuple[str, ...], Callable[[Query, str], Query]]] | None = None
    # the kit vouches that the name names this one collection (CSFCube: one release, fetched and
    # verified against the kit's manifest): its runs' folder is the plain name (`store_name`)
    named_by_kit: bool = False

    @property
    def store_name(self) -> str:
        """The collection's folder in the run store (``RUNS/PROFILE/<store_name>/PROTOCOL/RUN``): the
        plain name where the kit vouches for it (`named_by_kit`: ``csfcube``), else the name's slug and
        a digest of the name and the data's `identity` (`evalkit.core.names.labelled`), so two
        collections of one name (BEIR folders ``a/toy`` and ``b/toy``) never share a folder, nor do a
        name and another's derived form (``café``, ``caf-850f7dc4``); the same data under the same
        name, read from anywhere, shares it."""
        if self.named_by_kit:
            return name_part(self.name)
        return labelled(self.name, json.dumps([self.name, self.identity], ensure_ascii=False), "collection")

    @cached_property
    def identity(self) -> str:
        """What identifies the data in run sidecars (``data_sha256``): the adapter's `checksum`,
        else `content_sha256` (computed once per collection)."""
        return self.checksum or self.content_sha256()

    def content_sha256(self) -> str:
        """sha256 of everything a run or an evaluation of this collection reads: the documents
        (ids, titles, bodies, labelled sentences) and queries (text, instruction, seed, facet) in
        collection order, every variant's query text and instruction, the qrels and relevance
        level, candidate lists, exclusions, pairs, folds, groups and strata. Deterministic for the
        same data (a loader that reads the same files in the same order gives the same digest);
        the name and headline measures are left out (the name keys runs on its own, the measures
        change no value)."""
        digest = hashlib.sha256()

        def feed(part: str, value) -> None:
            digest.update(json.dumps([part, value], ensure_ascii=False, separators=(",", ":")).encode())
            digest.update(b"\n")

        for document in self.documents.values():
            feed("document", _document_record(document))
        for query in self.queries.values():
            feed("query", [query.qid, query.text, query.instruction, query.facet,
                           None if query.seed is None else _document_record(query.seed)])
        for variant in self.variants:
            if variant == BASE:
                continue  # the base query is the query itself, fed above
            for qid in self.queries:
                try:
                    made = self.make_variant(self.queries[qid], variant)
                    feed("variant", [variant, qid, made.text, made.instruction, made.facet])
                except KitError as exc:  # a variant some queries do not have: its runs fail the same way
                    feed("variant", [variant, qid, "error", str(exc)])
        feed("variants", list(self.variants))
        feed("relevance_level", self.relevance_level)
        for qid, grades in self.qrels.items():
            feed("qrels", [qid, sorted(grades.items())])
        feed("candidates", None if self.candidates is None else [[q, list(ids)] for q, ids in self.candidates.items()])
        feed("exclude", sorted(self.exclude.items()))
        feed("pairs", sorted(self.pairs.items()))
        feed("folds", sorted((name, list(fold.dev), list(fold.test)) for name, fold in self.folds.items()))
        feed("groups", sorted((name, list(qids)) for name, qids in self.groups.items()))
        feed("strata", sorted(self.strata.items()))
        return digest.hexdigest()

    def with_instructions(self, path: Path) -> Collection:
        """The collection with the variants of an instruction file instead of its own."""
        if self.instructions_from is None:
            raise RequestError("instructions", f"{self.name} takes no instruction file (its instructions come with its "
                                               "queries); drop {instructions}")
        variants, make_variant = self.instructions_from(Path(path))
        return replace(self, variants=variants, make_variant=make_variant)

    def query(self, qid: str, variant: str = BASE) -> Query:
        """The query `qid` under an instruction variant."""
        if variant not in self.variants:
            raise RequestError("variant",
                               f"{self.name} has no variant {variant!r}; choose one of {', '.join(self.variants)}")
        return self.make_variant(self.queries[qid], variant)

    def candidates_of(self, qid: str) -> list[Document]:
        """The documents a model ranks for `qid`: its given list, else the whole corpus; the
        query's excluded document (e.g. its seed) removed."""
        ids: Sequence[str] = self.candidates[qid] if self.candidates is not None else list(self.documents)
        skip = self.exclude.get(qid)
        return [self.documents[d] for d in ids if d != skip]

    @cached_property
    def judged(self) -> dict[str, dict[str, int]]:
        """The qrels measures score against: each query's grades without its excluded document."""
        return {qid: {d: g for d, g in grades.items() if d != self.exclude.get(qid)}
                for qid, grades in self.qrels.items()}

    def including_excluded(self) -> Collection:
        """The same collection with nothing excluded: every given candidate ranked and judged
        (CSFCube's pools as released, each seed kept where its own pool lists it)."""
        return replace(self, exclude={})

    @cached_property
    def by_seed(self) -> dict[str, tuple[str, ...]]:
        """The seed-to-query map: each seed paper's query ids (CSFCube: its annotated facets), in
        collection order; empty when no query has a seed."""
        found: dict[str, list[str]] = {}
        for qid, query in self.queries.items():
            if query.seed is not None:
                found.setdefault(query.seed.doc_id, []).append(qid)
        return {seed: tuple(qids) for seed, qids in found.items()}

    @cached_property
    def relevant(self) -> dict[str, frozenset[str]]:
        """Binary relevance per query: grade >= the collection's relevance level."""
        return {qid: frozenset(d for d, g in grades.items() if g >= self.relevance_level)
                for qid, grades in self.qrels.items()}

    def test_fold_of(self, qid: str) -> str | None:
        """The fold whose test half holds `qid` (for the fold-mean aggregate), or None."""
        for name, fold in self.folds.items():
            if qid in fold.test:
                return name
        return None

    def has_sentences(self) -> bool:
        return any(q.seed is not None and q.seed.sentences for q in self.queries.values())

    def has_facet_labels(self) -> bool:
        return any(q.facet for q in self.queries.values()) and any(
            s.label for q in self.queries.values() if q.seed for s in q.seed.sentences)

    def select(self, qids: Sequence[str]) -> Collection:
        """The same collection restricted to some queries (smoke runs); pairs whose partner is
        dropped are dropped too."""
        keep = [q for q in self.queries if q in set(qids)]
        unknown = sorted(set(qids) - set(self.queries))
        if unknown:
            raise RequestError("queries", f"{self.name} has no query {unknown[0]}; list existing query ids")
        chosen = set(keep)
        return replace(
            self,
            queries={q: self.queries[q] for q in keep},
            qrels={q: self.qrels[q] for q in keep if q in self.qrels},
            candidates=None if self.candidates is None else {q: self.candidates[q] for q in keep
                                                             if q in self.candidates},
            pairs={a: b for a, b in self.pairs.items() if a in chosen and b in chosen},
            groups={g: tuple(q for q in qs if q in chosen) for g, qs in self.groups.items()
                    if any(q in chosen for q in qs)},
        )

    def checked(self) -> Collection:
        """The collection itself once `check` passes (an adapter's ``return Collection(...).checked()``)."""
        self.check()
        return self

    def check(self) -> None:
        """Reject qrels or candidate lists that name documents the corpus lacks, and pairs or
        folds that name unknown queries, ids that are empty or hold a control or line-separator
        character (`check_id`), and empty collections: a silent nDCG of 0, or a "complete" run of
        no query, is worse than an error."""
        for part, found in (("documents", self.documents), ("queries", self.queries)):
            if not found:
                raise DataError(self.name, f"the collection has no {part}; check its files (an empty file, "
                                "or qrels that judge no query)")
        for kind, ids in (("query", self.queries), ("document", self.documents)):
            for position, rid in enumerate(ids, start=1):
                check_id(self.name, kind, position, rid)
        for source, table in (("qrels", self.qrels), ("candidates", self.candidates or {})):
            for qid, docs in table.items():
                missing = next((d for d in docs if d not in self.documents), None)
                if missing is not None:
                    raise DataError(self.name, f"{source} of query {qid} name document {missing}, absent "
                                    "from the corpus; fix the corpus or the file")
        named = [("instruction pair", q) for pair in self.pairs.items() for q in pair]
        named += [(f"fold {name}", q) for name, fold in self.folds.items() for q in fold.dev + fold.test]
        named += [(f"group {name}", q) for name, qids in self.groups.items() for q in qids]
        unknown = next(((where, q) for where, q in named if q not in self.queries), None)
        if unknown is not None:
            raise DataError(self.name, f"{unknown[0]} names unknown query {unknown[1]}; fix the file that lists it")


# Characters no id may hold: the control characters (Unicode category Cc: newline, tab, NUL, NEL...)
# and the line and paragraph separators (U+2028, U+2029), which would split an error line, a TSV or
# TREC line, or a table cell in two.
_UNSAFE_ID = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_id(source: object, kind: str, position: int, rid: object) -> str:
    """`rid` when it is a non-empty string free of control and line-separator characters, else one
    line (DataError of `source`) naming the `position`-th `kind` (1 = the first) and the character."""
    if not isinstance(rid, str) or not rid:
        raise DataError(source, f"{kind} {position} has the empty id {ascii(rid)}; give every {kind} a "
                                "non-empty id")
    bad = _UNSAFE_ID.search(rid)
    if bad is not None:
        raise DataError(source, f"{kind} {position} has the id {ascii(rid)[:60]}, which holds the control or "
                                f"line-separator character U+{ord(bad.group()):04X} at character {bad.start() + 1}; "
                                f"give every {kind} an id of printable characters")
    return rid


LISTED_SEEDS = 60  # an unknown seed's error lists the collection's seeds up to this many (CSFCube has 34)


def selection_ids(field: str, given: object) -> tuple[str, ...]:
    """A list of ids as given (each a string or number), repeats dropped (the first kept): the
    shape rule of `seeds` and `queries`, which needs no collection."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence | set | frozenset | tuple):
        raise RequestError(field, f"a {type(given).__name__} is not a list of ids; give a list, e.g. [\"929877\"]",
                           value=given if not isinstance(given, str) else given[:60])
    ids = tuple(dict.fromkeys(str(i).strip() for i in given if str(i).strip()))
    if not ids:
        raise RequestError(field, "names no ids; give some, or leave it out for every query")
    return ids


def check_selection(seeds: object = None, queries: object = None) -> None:
    """What `select_queries` rules before it reads a collection: `seeds` or `queries`, not both,
    each a list of ids (`selection_ids`); the request's rules run it before anything is loaded."""
    if seeds is not None and queries is not None:
        raise RequestError("seeds", "give {seeds} or {queries}, not both")
    for name, given in (("seeds", seeds), ("queries", queries)):
        if given is not None:
            selection_ids(name, given)


def select_queries(collection: Collection, seeds: object = None, queries: object = None) -> tuple[str, ...] | None:
    """The one rule that turns a selection into query ids, for every front end: `seeds` (seed
    papers: each seed's queries, `Collection.by_seed`) or `queries` (query ids), not both; each
    id must be the collection's. The ids come back in collection order, so the same selection
    keys the same run however it was listed. None: every query."""
    check_selection(seeds, queries)
    if seeds is not None:
        chosen = selection_ids("seeds", seeds)
        by_seed = collection.by_seed
        if not by_seed:
            raise RequestError("seeds", f"names seed papers; {collection.name} has none: give {{queries}}")
        unknown = next((s for s in chosen if s not in by_seed), None)
        if unknown is not None:
            known = sorted(by_seed, key=lambda s: (len(s), s))
            listed = ", ".join(known) if len(known) <= LISTED_SEEDS else ", ".join(known[:LISTED_SEEDS]) + ", ..."
            raise RequestError("seeds", f"{collection.name} has no seed paper {unknown}; give seed ids of its queries "
                               f"(its {len(known)} seeds: {listed})")
        wanted = {qid for seed in chosen for qid in by_seed[seed]}
    elif queries is not None:
        chosen = selection_ids("queries", queries)
        unknown = next((q for q in chosen if q not in collection.queries), None)
        if unknown is not None:
            raise RequestError("queries", f"{collection.name} has no query {unknown}; give ids of its queries")
        wanted = set(chosen)
    else:
        return None
    return tuple(qid for qid in collection.queries if qid in wanted)


def select_variant(collection: Collection, variant: object, field: str = "variant") -> str:
    """One variant name (a front end that takes one: ``variant=``), by `select_variants`' rule."""
    if not isinstance(variant, str):
        raise RequestError(field, "give one variant name", value=variant)
    return select_variants(collection, variant, field=field, offer_file=False)[0]


def select_variants(collection: Collection, variants: object = None, *, field: str = "variants",
                    every: bool = False, offer_file: bool = True) -> tuple[str, ...]:
    """The one rule for the instruction variants asked for, for every front end: one name or a
    list of them (none twice), each one of `collection`'s; None gives ``base``, or with `every`
    each of the collection's variants. `field` names the request's field (``variants``, or
    ``variant`` where a front end takes one); `offer_file`: the error suggests a user's instruction
    file (``{instructions}``), where the front end takes one and none was given."""
    if variants is None:
        return tuple(collection.variants) if every else (BASE,)
    if not isinstance(variants, str | Sequence) or isinstance(variants, bytes):
        raise RequestError(field, f"a {type(variants).__name__} is not a variant name; give one or a list of them",
                           value=variants)
    chosen = [variants] if isinstance(variants, str) else list(variants)
    if not chosen:
        raise RequestError(field, "names no variant; give some, or leave it out for base", value=chosen)
    repeated = next((v for v in chosen if chosen.count(v) > 1), None)
    if repeated is not None:
        raise RequestError(field, f"lists {repeated} twice; list each variant once")
    unknown = next((v for v in chosen if not isinstance(v, str) or v not in collection.variants), None)
    if unknown is not None:
        raise RequestError(field, f"{collection.name} has the variants {', '.join(collection.variants)}"
                           + (" (give {instructions} for your own)" if offer_file else ""), value=unknown)
    return tuple(chosen)
