"""The dense index of whole-corpus retrieval (`VectorIndex`): a corpus's document vectors under
one model, on disk, built by streaming and searched exactly.

Document vectors are streamed, a batch at a time, into a file of rows under the cache folder
(``indexes/<key>/``, float32 or, when asked, float16; the dtype is recorded in ``meta.json`` and
the run's sidecar), keyed by the corpus checksum and what makes a document vector (model
fingerprint, document template, dtype). The model's batches are the corpus's distinct model
inputs in the order they first occur, `BATCH` at a time (or the corpus's own `Corpus.batch`, a
batch also ending after the documents its `Corpus.ends` counts; `batch_plan`), encoded by the
model alone (no embedding cache in between, which a build neither reads nor writes): a batch's
contents, and so every vector's bits, are a function of the corpus, never of what a cache held or
of which process or node encoded it; a document whose input an earlier one has gets that
document's row. A collection's index is also where its pool runs over every query read their
document vectors (`evalkit.pipeline.runner.whole_corpus`, `evalkit.models.base.index_documents`),
so a study encodes each document once.
Every batch is committed with its documents (rows, ids, then the row count in ``meta.json``), so
a killed build resumes after its last committed batch (the batches encoded but not committed are
encoded again); a finished index serves every prompt and variant run (only queries are encoded). The file
is memory-mapped, so the corpus may exceed memory. Every file is checked against the sizes and
checksums ``meta.json`` records before it is read (`verify`), and ``meta.json`` against its own
checksum (``meta_sha256``, over every other field) and the range of each value (`read_meta`): a
changed byte or an impossible value (a NaN or negative ``max_norm``) is a one-line error naming
the folder and the fix, never a ranking. A failed write (a full disk) names the folder and
leaves the last committed batch, never an index that reads as complete.

Search is blocked matrix products (the file read one block of rows at a time, all queries of a
batch against it; numpy on the CPU, torch on a GPU when one is visible or named by
``EVALKIT_SEARCH_DEVICE``) keeping, per query, every row whose score is within a proven float32
error bound of the running ``k``-th best; that shortlist is then rescored on the CPU by the
model's own `similarity` (a function of each row alone, so a document's score is the one an
exhaustive pass gives it) and ranked by the kit's tie rule (`evalkit.data.runs.ranked`), the
queries spread over the cores. The bound makes the result the exhaustive one, ties at the
cut-off included: a row outside the shortlist scores below at least ``k`` rows inside it
whatever the rounding (`evalkit.retrieval.exact_search.error_bound`), so the device changes the
time, never the ranking. Blocked products rather than FAISS flat: it reads a memory-mapped or
float16 file block by block, which FAISS's flat index (all vectors in memory, float32) does not;
bench/bench_retrieval.py measures the two.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from evalkit.core import configfile, progress
from evalkit.core.errors import DataError, KitError, RequestError
from evalkit.core.locks import exclusive, lock_file
from evalkit.core.workspace import cache_root
from evalkit.data.collection import Document
from evalkit.data.runs import write_atomic
from evalkit.retrieval.corpus import DTYPES, Corpus
from evalkit.retrieval.exact_search import TieRule, block_hits, error_bound, search_device

INDEX_VERSION = 4  # 2: per-block checksums in meta.json, verified at open; 3: meta.json's own checksum;
#  4: batches of distinct model inputs, encoded without the embedding cache (`batch_plan`)
BATCH = 4096  # distinct model inputs per batch of a build (`batch_plan`)
SCORE_CELLS = 1 << 24  # query x row scores held at once in a search (64 MB of float32)


def index_folder(kind: str, parts: dict) -> Path:
    """``<cache>/indexes/<kind>-<16 hex digits of sha256(parts)>``."""
    digest = hashlib.sha256(json.dumps({**parts, "index_version": INDEX_VERSION}, sort_keys=True,
                                       default=str).encode()).hexdigest()[:16]
    return cache_root() / "indexes" / f"{kind}-{digest}"



class VectorIndex:
    """A corpus's document vectors under one model: a memory-mapped file of rows, built by
    streaming (resumable), searched by blocked matrix products (module docstring)."""

    def __init__(self, folder: Path):
        """Open a complete index, every file checked against the sizes and checksums its
        ``meta.json`` records (`verify`): a changed byte is a one-line error, never a ranking."""
        self.folder = Path(folder)
        meta = read_meta(self.folder)
        if meta is None or not meta.get("complete"):
            raise DataError(self.folder / 'meta.json', "the vector index is missing or incomplete; "
                            "run again to build it")
        self.meta = meta
        self.dim, self.dtype, self.max_norm = meta["dim"], np.dtype(meta["dtype"]), meta["max_norm"]
        verify(self.folder, meta)
        self.ids = (self.folder / "ids.txt").read_text(encoding="utf-8").splitlines()
        self.rows = (np.memmap(self.folder / "vectors.bin", dtype=self.dtype, mode="r", shape=(meta["rows"], self.dim))
                     if meta["rows"] else np.zeros((0, self.dim or 1), dtype=self.dtype))

    @classmethod
    def open(cls, corpus: Corpus, encode: Callable[[list[Document]], np.ndarray], parts: dict,
             dtype: str = "float32", executor=None, key: Callable[[Document], str] | None = None) -> VectorIndex:
        """The index of `corpus` under `encode` (the model's vectors of a batch of documents, no
        cache in between), built or resumed when incomplete. `parts` is what makes a document
        vector (keys the folder); `key(document)` is the exact model input a document's vector is
        made from (its text as the template renders it): documents of one input are encoded once
        (`batch_plan`; without `key`, every document is its own input); `executor` encodes the
        batches (`evalkit.retrieval.executors`: in this process by default, or on Ray workers),
        which are committed here in corpus order whoever encodes them.

        One process builds at a time (a lock beside the folder, `evalkit.core.locks`); another that
        wants the same index waits and then uses the finished one, so concurrent runs never
        interleave their rows. Readers open only a folder whose ``meta.json`` says complete,
        which the build writes last."""
        if dtype not in DTYPES:
            raise RequestError("index_dtype", f"is not one of {', '.join(DTYPES)}", value=dtype)
        folder = index_folder("dense", {**parts, "corpus": corpus.key, "dtype": dtype})
        meta = read_meta(folder)
        if meta is None or not meta.get("complete"):
            with exclusive(lock_file(folder), f"vector index of {corpus.name}"):
                meta = read_meta(folder)  # another process may have finished it meanwhile
                if meta is None or not meta.get("complete"):
                    try:
                        _build(folder, corpus, encode, dtype, meta, executor, key)
                    except OSError as exc:  # a full disk, a read-only cache: the folder and the fix
                        raise DataError(folder, f"cannot write the vector index ({exc.strerror or exc}); free "
                                        "space there or point EVALKIT_CACHE elsewhere, then run again (the "
                                        "batches already committed are kept)") from None
        index = cls(folder)
        if not index.ids:
            raise DataError(corpus.name, "the corpus holds no documents")
        return index

    def search(self, query_vectors: np.ndarray, k: int, exclude: Sequence[str | None], metric: str,
               similarity: Callable[[np.ndarray, np.ndarray], np.ndarray],
               span: tuple[int, int] | None = None) -> list[dict[str, float]]:
        """Per query, its top `k` rows ({doc id: the model's `similarity`}), `exclude[i]` left out;
        `span` (begin, end): only those rows (a shard; `evalkit.retrieval.exact_search.merge_top`
        merges shards' tops into the whole index's, exactly)."""
        queries = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if queries.shape[1] != self.dim:
            raise DataError(self.folder, f"the index holds {self.dim}-dimensional vectors, the queries have "
                            f"{queries.shape[1]}; delete the folder to rebuild it")
        row_of = {doc: i for i, doc in enumerate(self.ids)} if any(exclude) else {}
        skip = np.array([row_of.get(e, -1) if e else -1 for e in exclude], dtype=np.int64)

        def rescored(q: np.ndarray, rows: np.ndarray) -> np.ndarray:
            return similarity(q, np.asarray(self.matrix[rows], dtype=np.float32))

        out = []
        per_batch = max(1, min(len(queries), SCORE_CELLS // max(1, min(len(self.ids), 1 << 16))))
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            for start in range(0, len(queries), per_batch):
                part = queries[start:start + per_batch]
                shortlists = self._shortlists(part, k, skip[start:start + per_batch], metric, span)
                # the gathers and products (no GIL) across threads, the tie rule here as they come
                with threadpool_limits(1, "blas"):
                    for rows, exact in zip(shortlists, pool.map(rescored, part, shortlists)):
                        out.append(self.tie_rule.top(rows, exact, k))
        return out

    @cached_property
    def matrix(self) -> np.ndarray:
        """The rows as a plain array over the mapped file (one copy per gather, not two)."""
        return self.rows.view(np.ndarray)

    @cached_property
    def tie_rule(self) -> TieRule:
        return TieRule(self.ids)

    def _shortlists(self, queries: np.ndarray, k: int, skip: np.ndarray, metric: str,
                    span: tuple[int, int] | None = None) -> list[np.ndarray]:
        """Per query, the rows (of `span`, default all) whose blocked score is within twice
        `error_bound` of its k-th best (each block's products and hits by `block_hits` for the
        search's device)."""
        first, n = span if span is not None else (0, len(self.ids))
        slack = 2 * error_bound(metric, self.dim, np.linalg.norm(queries.astype(np.float64), axis=1), self.max_norm)
        block = max(1024, SCORE_CELLS // len(queries))
        pool_rows = [np.zeros(0, dtype=np.int64) for _ in queries]
        pool_scores = [np.zeros(0, dtype=np.float32) for _ in queries]
        floor = np.full(len(queries), -np.inf)
        hits_of = block_hits(search_device(), queries, metric, k, slack)
        for begin in range(first, n, block):
            rows = np.asarray(self.rows[begin:min(begin + block, n)], dtype=np.float32)
            inside = np.flatnonzero((skip >= begin) & (skip < begin + len(rows)))
            hit_q, hit_r, hit_scores = hits_of(rows, (inside, skip[inside] - begin), floor)
            bounds = np.searchsorted(hit_q, np.arange(len(queries) + 1))
            for i in range(len(queries)):
                if bounds[i] == bounds[i + 1]:
                    continue
                found = np.concatenate([pool_scores[i], hit_scores[bounds[i]:bounds[i + 1]]])
                where = np.concatenate([pool_rows[i], hit_r[bounds[i]:bounds[i + 1]] + begin])
                keep = np.isfinite(found)
                found, where = found[keep], where[keep]
                if len(found) >= k:
                    floor[i] = np.partition(found, len(found) - k)[len(found) - k] - slack[i]
                    keep = found >= floor[i]
                    found, where = found[keep], where[keep]
                pool_scores[i], pool_rows[i] = found, where
        return [r[np.argsort(self.tie_rule.order[r])] for r in pool_rows]  # in id order (`TieRule.top`)



def read_meta(folder: Path) -> dict | None:
    """An index folder's ``meta.json``; None when there is none; a one-line error when it is
    not what the kit writes (cut, edited, of another shape)."""
    path = Path(folder) / "meta.json"
    try:  # a regular file of bounded size (a FIFO or a link to /dev/zero is damage, not a hang)
        text = configfile.read_bytes(path, follow=False, what="an index's meta.json").decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise damaged(folder, f"meta.json cannot be read ({exc})") from None
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError):
        raise damaged(folder, "meta.json is not valid JSON (cut or edited)") from None
    fields = {"rows": int, "dim": int, "dtype": str, "max_norm": (int, float), "blocks": list, "complete": bool,
              "corpus": str, "corpus_key": str, "index_version": int, "meta_sha256": str}
    if not isinstance(meta, dict) or any(not isinstance(meta.get(k), t) or isinstance(meta.get(k), bool) is not
                                         (t is bool) for k, t in fields.items()) \
            or meta["rows"] < 0 or meta["dim"] < 0 or meta["dtype"] not in DTYPES \
            or sum(b[0] for b in meta["blocks"] if _is_block(b)) != meta["rows"] \
            or not all(_is_block(b) for b in meta["blocks"]) \
            or not (meta.get("ids_sha256") is None and not meta["complete"] or _is_sha256(meta.get("ids_sha256"))):
        raise damaged(folder, "meta.json does not describe an index of this kit")
    if meta["index_version"] != INDEX_VERSION:
        raise damaged(folder, f"meta.json is of index version {meta['index_version']}, not {INDEX_VERSION}")
    if not math.isfinite(meta["max_norm"]) or meta["max_norm"] < 0 or meta["rows"] and not meta["dim"]:
        raise damaged(folder, f"meta.json records max_norm {meta['max_norm']!r} and dim {meta['dim']}, out of range "
                              "(a norm is a finite number >= 0; rows have a dimension)")
    if meta["meta_sha256"] != _meta_digest(meta):
        raise damaged(folder, "meta.json does not match its checksum (meta_sha256, over every other field)")
    return meta


def _meta_digest(meta: dict) -> str:
    """sha256 of every field of a ``meta.json`` but ``meta_sha256`` itself (sorted keys)."""
    fields = {k: v for k, v in meta.items() if k != "meta_sha256"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, allow_nan=True).encode()).hexdigest()


def _is_sha256(text) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _is_block(block) -> bool:
    return (isinstance(block, list) and len(block) == 2 and isinstance(block[0], int)
            and not isinstance(block[0], bool) and block[0] > 0 and _is_sha256(block[1]))


def damaged(folder: Path, problem: str) -> KitError:
    """The one line for an index folder that is not as its build left it."""
    return KitError(f"{folder}: the vector index is damaged: {problem}; delete the folder to rebuild it "
                    "(its documents are encoded again)")


_VERIFIED: set = set()  # (folder, the files' sizes and modification times) checked in this process


def verify(folder: Path, meta: dict, rows: int | None = None) -> None:
    """Check ``vectors.bin`` block by block (sha256 per committed batch) and ``ids.txt`` against
    `meta`, up to `rows` rows (all by default); once per process while the files are unchanged."""
    folder = Path(folder)
    rows = meta["rows"] if rows is None else rows
    vectors_path, ids_path = folder / "vectors.bin", folder / "ids.txt"
    try:
        stats = tuple((p.stat().st_size, p.stat().st_mtime_ns) for p in (vectors_path, ids_path))
    except OSError as exc:
        raise damaged(folder, f"{Path(exc.filename or vectors_path).name} is missing") from None
    token = (str(folder), rows, stats, json.dumps(meta["blocks"]))
    if token in _VERIFIED:
        return
    row_bytes = meta["dim"] * np.dtype(meta["dtype"]).itemsize
    if stats[0][0] < rows * row_bytes or meta["complete"] and rows == meta["rows"] and stats[0][0] != rows * row_bytes:
        raise damaged(folder, f"vectors.bin holds {stats[0][0]} bytes where {rows} rows of {meta['dim']} "
                              f"{meta['dtype']} values take {rows * row_bytes} (truncated or appended to)")
    with _open(folder, ids_path) as fh:
        raw = fh.read()
    try:
        ids = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise damaged(folder, "ids.txt is not UTF-8 text") from None
    if len(ids) < rows or meta["complete"] and rows == meta["rows"] and len(ids) != rows:
        raise damaged(folder, f"ids.txt holds {len(ids)} ids where the index has {rows} rows")
    if meta["complete"] and hashlib.sha256(raw).hexdigest() != meta.get("ids_sha256"):
        raise damaged(folder, "ids.txt does not match its checksum")
    with _open(folder, vectors_path) as fh:
        done = 0
        for number, (count, digest) in enumerate(meta["blocks"], 1):
            if done >= rows:
                break
            if hashlib.sha256(fh.read(count * row_bytes)).hexdigest() != digest:
                raise damaged(folder, f"block {number} of vectors.bin (rows {done}-{done + count - 1}) does not "
                                      "match its checksum")
            done += count
    _VERIFIED.add(token)


def _open(folder: Path, path: Path):
    """`path` opened for reading when it is a regular file (`configfile.open_regular`, no link: the
    kit writes none), else the damaged-index line: a FIFO or /dev/zero is never read."""
    try:
        return configfile.open_regular(path, follow=False)
    except OSError as exc:
        raise damaged(folder, f"{path.name} cannot be read ({exc.strerror})") from None


class Segment:
    """A run of consecutive documents of the corpus committed together, and the documents among them
    whose model input no earlier document has (`fresh`: the batch the model encodes). ``sources[i]``
    is the row whose vector document ``i`` of the segment takes: its own for a fresh one, else the
    row of the first document of its input (earlier in this segment or already committed)."""

    def __init__(self, first: int):
        self.first, self.documents, self.fresh, self.sources = first, [], [], []


def batch_plan(documents, size: int, key: Callable[[Document], str] | None, done: int = 0, name: str = "corpus",
               ends: tuple[int, ...] = ()):
    """The segments of a corpus (`Segment`), each ending at the document that makes its `size`-th
    fresh input (the last one may have fewer, or none) or after the documents counted in `ends`
    (`Corpus.ends`): the model's batches are the corpus's distinct inputs in the order they first
    occur, `size` at a time, so a batch's contents (and every vector's bits) are a function of the
    corpus alone, never of a cache or of who encodes it.
    The first `done` documents (committed by an earlier build, which ended a segment there) are
    read for their inputs, not planned; yields (position, document) for those, then the segments."""
    first_row: dict[bytes, int] = {}
    segment = Segment(done)
    for position, document in enumerate(documents):
        if any(c.isspace() for c in document.doc_id) or not document.doc_id:
            raise DataError(name, f"document id {document.doc_id!r} is empty or holds whitespace")
        digest = None if key is None else hashlib.blake2b(key(document).encode(), digest_size=16).digest()
        row = position if digest is None else first_row.setdefault(digest, position)
        if position < done:
            yield position, document
            continue
        segment.documents.append(document)
        segment.sources.append(row)
        if row == position:
            segment.fresh.append(document)
        if (row == position and len(segment.fresh) == size) or position + 1 in ends:
            yield segment
            segment = Segment(position + 1)
    if segment.documents:
        yield segment


def _build(folder: Path, corpus: Corpus, encode, dtype: str, meta: dict | None, executor=None,
           key: Callable[[Document], str] | None = None) -> None:
    """Stream `corpus` into `folder`, resuming after the `meta` rows committed by an earlier run
    (checked against their checksums first): the segments of `batch_plan` in corpus order, each
    one's fresh documents encoded by `executor` (here, or on workers, several at once) as one batch
    of `BATCH` (the last may be smaller) and committed in order, a repeated input's row a copy of its
    first document's row. The caller holds the folder's lock."""
    folder.mkdir(parents=True, exist_ok=True)
    done = meta["rows"] if meta else 0
    dim, max_norm = (meta["dim"], meta["max_norm"]) if meta else (None, 0.0)
    blocks = list(meta["blocks"]) if meta else []
    itemsize = np.dtype(dtype).itemsize
    vectors_path, ids_path = folder / "vectors.bin", folder / "ids.txt"
    if done:
        verify(folder, meta)
    kept = ids_path.read_text(encoding="utf-8").splitlines()[:done] if done else []
    with open(vectors_path, "ab") as fh:  # drop what a kill left after the last commit
        fh.truncate(done * (dim or 0) * itemsize)
    write_atomic(ids_path, "".join(f"{d}\n" for d in kept))

    def commit(segment: Segment, vectors: np.ndarray | None, rows: int) -> int:
        nonlocal dim, max_norm
        if segment.fresh:
            vectors = np.asarray(vectors, dtype=np.float32)
            if dim is None and vectors.ndim == 2:
                dim = vectors.shape[1]
            if vectors.shape != (len(segment.fresh), dim):
                raise DataError(folder, f"the model gave vectors of shape {vectors.shape} for "
                                f"{len(segment.fresh)} documents of a {dim}-dimensional index; delete the folder "
                                "to rebuild it")
        sources = np.asarray(segment.sources, dtype=np.int64) - segment.first  # < 0: a committed row
        own = sources == np.arange(len(sources))
        if own.all():  # no repeated input (the common case): the batch's rows as they are
            stored = np.ascontiguousarray(vectors, dtype=dtype)
        else:
            stored = np.empty((len(sources), dim), dtype=dtype)
            if segment.fresh:
                stored[own] = vectors
            inside = ~own & (sources >= 0)
            stored[inside] = stored[sources[inside]]  # a first occurrence is always its own row
            earlier = np.flatnonzero(sources < 0)
            if len(earlier):  # repeated inputs of committed documents: their rows, as stored
                mapped = np.memmap(vectors_path, dtype=dtype, mode="r", shape=(rows, dim))
                stored[earlier] = mapped[sources[earlier] + segment.first]
                del mapped
        # float64 sums of squares (einsum: one pass, no float64 copy of the batch)
        norms = np.sqrt(np.einsum("ij,ij->i", stored, stored, dtype=np.float64))
        if not np.isfinite(norms).all():
            bad = segment.documents[int(np.flatnonzero(~np.isfinite(norms))[0])].doc_id
            raise DataError(folder, f"the model gave document {bad} a vector with a NaN or infinite value (as "
                            f"{dtype}); check the model (or use index dtype float32 where float16 overflows)")
        max_norm = max(max_norm, float(norms.max()))
        data = memoryview(stored).cast("B")  # the rows' bytes, not copied
        with open(vectors_path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        with open(ids_path, "a", encoding="utf-8") as fh:
            fh.write("".join(f"{d.doc_id}\n" for d in segment.documents))
        rows += len(segment.documents)
        blocks.append([len(segment.documents), hashlib.sha256(data).hexdigest()])
        _write_meta(folder, rows, dim, dtype, max_norm, corpus, blocks, complete=False)
        return rows

    rows = 0
    size = corpus.batch or BATCH  # read once: every batch of this build has one size, whoever encodes it
    planned: deque[Segment] = deque()  # segments whose batch is with the executor, in corpus order

    def batches(bar):
        """The fresh documents of each segment (`batch_plan`) to encode; a segment with none (only
        repeated inputs: the corpus's last, or one ended by `Corpus.ends`) is kept in `planned` for
        the loop below."""
        nonlocal rows
        for item in batch_plan(corpus.read(), size, key, done, corpus.name, corpus.ends):
            if isinstance(item, tuple):  # committed by an earlier run: not encoded again
                position, document = item
                if kept[position] != document.doc_id:
                    raise DataError(folder, "the corpus changed under a partial index; delete the folder")
                rows = position + 1
                bar.update(1)
                continue
            planned.append(item)
            if item.fresh:
                yield item.fresh

    with progress.bar(total=corpus.size, desc=f"index {corpus.name}", unit="doc", min_total=BATCH) as bar:
        encoded = (((batch, encode(batch)) for batch in batches(bar)) if executor is None  # in this process
                   else executor.encode_batches(encode, batches(bar), folder))
        def take(vectors: np.ndarray | None = None) -> None:
            """Commit the first planned segment (its batch's `vectors`; None: repeated inputs only)."""
            nonlocal rows
            segment = planned.popleft()
            rows = commit(segment, vectors, rows)
            bar.update(len(segment.documents))

        for _batch, vectors in encoded:
            while not planned[0].fresh:  # segments of repeated inputs only, before this batch's
                take()
            take(vectors)
        while planned:  # a last segment of repeated inputs only
            take()
    if rows < done:
        raise DataError(folder, f"the corpus changed under a partial index (it has {rows} documents, the index "
                        f"{done}); delete the folder")
    _write_meta(folder, rows, dim or 0, dtype, max_norm, corpus, blocks, complete=True,
                ids_sha256=hashlib.sha256(ids_path.read_bytes()).hexdigest())


def _write_meta(folder: Path, rows: int, dim: int, dtype: str, max_norm: float, corpus: Corpus, blocks: list,
                complete: bool, ids_sha256: str | None = None) -> None:
    """Write ``meta.json`` whole (temporary file, rename), every field under ``meta_sha256``."""
    meta = {"rows": rows, "dim": dim, "dtype": dtype, "max_norm": max_norm, "corpus": corpus.name,
            "corpus_key": corpus.key, "blocks": blocks, "ids_sha256": ids_sha256, "complete": complete,
            "index_version": INDEX_VERSION}
    meta["meta_sha256"] = _meta_digest(meta)
    write_atomic(folder / "meta.json", json.dumps(meta, allow_nan=False) + "\n")
