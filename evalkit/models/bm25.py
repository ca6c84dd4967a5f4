"""BM25 over title and body (bm25s), scoring the query text; instructions are ignored.

Settings as bm25s' published benchmark runs it (xhluca/bm25s README and its BEIR benchmark):
the Lucene variant with k1 = 1.5, b = 0.75, English stopwords and the Snowball English
stemmer (PyStemmer), applied to documents and queries alike. Every setting is recorded in
the run's sidecar (`describe`). Term statistics come from the candidates being ranked (a
given candidate list, or the whole corpus); the index of the last candidate set is reused.

A whole corpus (`search`) is indexed once and kept on disk under the cache folder, keyed by
the corpus checksum, the settings and the bm25s version; all queries then go through bm25s'
batched top-k `retrieve`. The index's files (`INDEX_FILES`, every one it needs) are written with
``checksums.json`` last, which records those settings and every file's sha256; an index is
used only when its folder holds exactly those files, each matching, built with the same
settings, and neither the folder nor a file in it is a symbolic link (the kit writes none), so
a changed, cut, removed, unlisted or linked-in file, or an index of other settings, is one line
naming the folder. Two builds of one corpus give byte-identical files (the vocabulary is
numbered in sorted order, not in the order of Python's per-process string hashing).

bm25s' top-k selection breaks ties arbitrarily, so each query asks for one
more document than it keeps and checks whether the last one returned ties the ``k``-th;
when it does, that query's every score (`get_scores`) gives all rows tying the ``k``-th
(a query matching fewer than ``k`` documents ties at 0). The ``k`` kept are then those the
kit's tie rule ranks first, with the scores `score` gives (bm25s computes both with the
same `get_scores`). A query with an excluded
document is not searched (its term statistics would leave that document out): the runner
scores it as before.

A query with no term left after stopwords (empty, blank, stopwords only), or candidates with
none, scores every candidate 0: the kit's tie rule then ranks them by document id.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from evalkit.core import progress
from evalkit.core.errors import DataError, KitError, MissingPrerequisite
from evalkit.core.hashing import file_sha256
from evalkit.core.locks import exclusive, lock_file
from evalkit.data.collection import Document, Query
from evalkit.data.runs import write_atomic
from evalkit.retrieval.exact_search import TieRule
from evalkit.retrieval.vector_index import index_folder

QUERY_BATCH = 256  # queries per call of bm25s' retrieve
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")  # bm25s' term-frequency variants
# every file a published index needs: what bm25s' `save` writes (no corpus) and the kit's document ids
INDEX_FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "params.index.json",
               "vocab.index.json", "ids.json")
CHECKSUMS = "checksums.json"  # written last into a finished index: its settings and every file's sha256
LAYOUT = 2  # of a published index (2: settings in checksums.json, sorted vocabulary); in its key


class BM25:
    reads_instruction = False

    def __init__(self, k1: float = 1.5, b: float = 0.75, method: str = "lucene", stopwords: str = "en",
                 stemmer: str | None = "english"):
        for name, value, low, high in (("k1", k1, 0, math.inf), ("b", b, 0, 1)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high \
                    or not math.isfinite(value):
                raise DataError("model settings",
                                f"BM25 setting {name}={value!r} must be a finite number in [{low}, {high}]; "
                                "fix the model's registry entry")
        if method not in METHODS:
            raise DataError("model settings", f"BM25 setting method={method!r} is not one of {', '.join(METHODS)}; "
                                              "fix the model's registry entry")
        if stemmer is not None and stemmer not in Stemmer.algorithms():
            raise DataError("model settings",
                            f"BM25 setting stemmer={stemmer!r} is not a Snowball stemmer (PyStemmer knows "
                            f"{', '.join(Stemmer.algorithms())}) nor null; fix the model's registry entry")
        if not (stopwords is None or isinstance(stopwords, str)
                or isinstance(stopwords, list) and all(isinstance(w, str) for w in stopwords)):
            raise DataError("model settings",
                            f"BM25 setting stopwords={stopwords!r} must be a language code, a list of words or "
                            "null; fix the model's registry entry")
        try:
            bm25s.tokenize(["probe"], stopwords=stopwords, show_progress=False)
        except ValueError:
            raise DataError("model settings",
                            f"BM25 setting stopwords={stopwords!r} is not a language bm25s has stopwords for "
                            "(en, de, nl, fr, es, pt, it, ru, sv, no, zh, tr, ko, da), a list of words or null; "
                            "fix the model's registry entry") from None
        self.k1, self.b, self.method, self.stopwords, self.stemmer_name = k1, b, method, stopwords, stemmer
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self._indexed: tuple[tuple[str, ...], bm25s.BM25 | None] | None = None
        self._corpus: tuple[str, TieRule, bm25s.BM25 | None] | None = None  # (corpus key, its ids, index)

    def prepare(self, documents: Sequence[Document]) -> None:
        pass

    def _tokens(self, texts: list[str], return_ids: bool = True):
        return bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self._stemmer, return_ids=return_ids,
                              show_progress=False)

    def _new_index(self, documents: Sequence[Document]) -> bm25s.BM25 | None:
        """The index of the documents; None when no document has a term."""
        tokenized = _sorted_vocabulary(self._tokens([d.full_text for d in documents]))
        if not tokenized.vocab:
            return None
        retriever = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        retriever.index(tokenized, show_progress=False)
        return retriever

    def _index(self, candidates: Sequence[Document]) -> bm25s.BM25 | None:
        ids = tuple(d.doc_id for d in candidates)
        if self._indexed is None or self._indexed[0] != ids:
            self._indexed = (ids, self._new_index(candidates))
        return self._indexed[1]

    def score(self, query: Query, candidates: Sequence[Document]) -> dict[str, float]:
        tokens = (self._tokens([query.text], return_ids=False) or [[]])[0]
        index = self._index(candidates)
        if not tokens or index is None:
            return {d.doc_id: 0.0 for d in candidates}
        scores = index.get_scores(tokens)
        return {d.doc_id: float(s) for d, s in zip(candidates, scores)}

    # -- a whole corpus ---------------------------------------------------------------------
    def can_search(self, excluding: bool) -> bool:
        return not excluding

    def corpus_index(self, corpus) -> tuple[TieRule, bm25s.BM25 | None]:
        """(the tie rule over the ids in index order, the bm25s index) of `corpus`: from memory, the
        disk (its files checked against their checksums), or built. One process builds at a time
        (a lock beside the folder); the build goes into a private ``.partial-PID`` sibling, renamed
        into place once its checksums are written, so a reader sees a complete index or none."""
        if self._corpus is not None and self._corpus[0] == corpus.key:
            return self._corpus[1], self._corpus[2]
        settings = {**self.describe(), "corpus": corpus.key, "bm25s": bm25s.__version__, "layout": LAYOUT}
        folder = index_folder("bm25", settings)
        found = _load(folder, settings)
        if found is None:
            with exclusive(lock_file(folder), f"BM25 index of {corpus.name}"):
                found = _load(folder, settings) or self._build(folder, corpus, settings)
        ids, retriever = found
        self._corpus = (corpus.key, TieRule(ids), retriever)
        return self._corpus[1], retriever

    def _build(self, folder: Path, corpus, settings: dict) -> tuple[list[str], bm25s.BM25 | None]:
        """Index `corpus` and publish it at `folder` with the `settings` it was built with (the
        caller holds its lock)."""
        documents = list(corpus.read())
        ids = [d.doc_id for d in documents]
        retriever = self._new_index(documents)
        if retriever is None:  # a corpus without a term is not worth keeping
            return ids, None
        _remove_dead_partials(folder)
        partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
        try:
            shutil.rmtree(partial, ignore_errors=True)
            retriever.save(partial, show_progress=False)
            (partial / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
            written = sorted(p.name for p in partial.iterdir())
            if written != sorted(INDEX_FILES):
                shutil.rmtree(partial, ignore_errors=True)
                raise MissingPrerequisite(f"bm25s {bm25s.__version__} saved the files {written}, not the ones the "
                                          f"kit checks {sorted(INDEX_FILES)}",
                                          "install a bm25s release whose save writes those")
            sums = {name: file_sha256(partial / name) for name in INDEX_FILES}
            write_atomic(partial / CHECKSUMS, json.dumps({"settings": settings, "files": sums}, indent=1,
                                                         sort_keys=True))  # last: complete
            os.replace(partial, folder)
        except OSError as exc:  # a full disk, a read-only cache: nothing half-written is left
            shutil.rmtree(partial, ignore_errors=True)
            if folder.is_dir() and (folder / CHECKSUMS).is_file():  # published by another process meanwhile
                return _load(folder, settings)
            raise DataError(folder, f"cannot write the BM25 index ({exc.strerror or exc}); free disk space or set "
                            "EVALKIT_CACHE to a writable folder with room") from None
        return ids, retriever

    def search(self, queries: Sequence[Query], corpus, k: int, exclude=None,
               dtype: str | None = None, executor=None) -> dict[str, dict[str, float]]:
        """Each query's top `k` of `corpus`, as `score` over the whole corpus ranks them (module
        docstring); `dtype` and `executor` are for vector indexes: BM25 has none and indexes and
        searches in this process."""
        tie_rule, retriever = self.corpus_index(corpus)
        tokens = self._tokens([q.text for q in queries], return_ids=False)
        out = {}
        with progress.bar(total=len(queries), desc=f"bm25 {corpus.name}", unit="query", min_total=64) as bar:
            for start in range(0, len(queries), QUERY_BATCH):
                part = list(range(start, min(start + QUERY_BATCH, len(queries))))
                termless = [i for i in part if retriever is None or not tokens[i]]
                for i in termless:  # no term to match: every document scores 0, ranked by the tie rule
                    out[queries[i].qid] = tie_rule.top(np.arange(len(tie_rule.ids)), np.zeros(len(tie_rule.ids)), k)
                searched = [i for i in part if i not in termless]
                if searched:
                    for i, (rows, scores) in zip(searched, self._top(retriever, [tokens[i] for i in searched], k)):
                        out[queries[i].qid] = tie_rule.top(rows, scores, k)
                bar.update(len(part))
        return out

    @staticmethod
    def _top(retriever: bm25s.BM25, tokens: list[list[str]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (rows, scores) of its top `k` and of every row tying the `k`-th."""
        n = retriever.scores["num_docs"]
        k = min(k, n)
        rows, scores = retriever.retrieve(tokens, k=min(k + 1, n), return_as="tuple", show_progress=False,
                                          sorted=True)
        out = []
        for query, row, score in zip(tokens, rows, scores):
            if k < n and score[-1] == score[k - 1]:  # the one after the k-th ties it: every tied row
                every = retriever.get_scores(query) if query else np.zeros(n, dtype=score.dtype)
                row = np.flatnonzero(every >= score[k - 1])
                score = every[row]
            out.append((np.asarray(row), np.asarray(score)))
        return out

    def describe(self) -> dict:
        return {"family": "bm25", "k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "stemmer": self.stemmer_name}


def _sorted_vocabulary(tokenized):
    """`tokenized` with its vocabulary numbered in sorted token order. bm25s numbers tokens in the
    iteration order of a set of strings, which Python's string hashing changes per process
    (PYTHONHASHSEED), so the index's files differed between identical builds; scores do not
    depend on the numbering."""
    order = {token: i for i, token in enumerate(sorted(tokenized.vocab))}
    renumber = {old: order[token] for token, old in tokenized.vocab.items()}
    return type(tokenized)(ids=[[renumber[i] for i in doc] for doc in tokenized.ids], vocab=order)


def _load(folder: Path, settings: dict) -> tuple[list[str], bm25s.BM25] | None:
    """A published index (ids, retriever) built with `settings`; None when there is none; a one-line
    error when it cannot be trusted: the folder or a file in it is a symbolic link, a file of
    `INDEX_FILES` is missing, changed or cut, a file is there that none lists, or ``checksums.json``
    lists other files or records other settings."""
    if folder.is_symlink():
        raise DataError(folder, f"the BM25 index folder is a symbolic link (to {os.readlink(folder)}), which the "
                        "kit never writes; delete the link to rebuild the index")
    if not folder.exists():
        return None

    def damaged(problem: str) -> KitError:
        return KitError(f"{folder}: the BM25 index is damaged: {problem}; delete the folder to rebuild it")

    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise damaged(f"it cannot be listed ({exc.strerror or exc})") from None
    for path in entries:
        if path.is_symlink():
            raise damaged(f"{path.name} is a symbolic link (to {os.readlink(path)}), which the kit never writes")
    names = {path.name for path in entries}
    for name in (*INDEX_FILES, CHECKSUMS):
        if name not in names or not (folder / name).is_file():
            raise damaged(f"{name} is missing" if name != CHECKSUMS else
                          f"it has no {CHECKSUMS} (not written by this kit's build)")
    unlisted = sorted(names - {*INDEX_FILES, CHECKSUMS})
    if unlisted:
        raise damaged(f"{unlisted[0]} is not a file of a BM25 index")
    try:
        recorded = json.loads((folder / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        raise damaged(f"{CHECKSUMS} cannot be read") from None
    sums = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(sums, dict) or sorted(sums) != sorted(INDEX_FILES):
        raise damaged(f"{CHECKSUMS} does not list exactly the index's files {list(INDEX_FILES)}")
    if recorded.get("settings") != json.loads(json.dumps(settings)):
        raise damaged(f"{CHECKSUMS} records other settings than this index's ({recorded.get('settings')!r})")
    for name in INDEX_FILES:
        if file_sha256(folder / name) != sums[name]:
            raise damaged(f"{name} does not match its checksum")
    try:
        ids = json.loads((folder / "ids.json").read_text(encoding="utf-8"))
        retriever = bm25s.BM25.load(folder)
    except (OSError, ValueError, KeyError) as exc:
        raise damaged(f"bm25s cannot read it ({exc})") from None
    return ids, retriever


def _remove_dead_partials(folder: Path) -> None:
    """Remove ``.partial-PID`` siblings of `folder` whose writer is no longer running (killed builds)."""
    for path in folder.parent.glob(folder.name + ".partial-*"):
        pid = path.name.rpartition("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
