"""Fault injection, embedding cache: vectors checked for dimension and finiteness on write and on
read, each row's checksum bound to its key and the model's fingerprint (swapped rows, a NULL
checksum fail it); a damaged, read-only or full cache file is one line naming the file and the
fix; the result is never silently different (a damaged vector is encoded again).

(The LLM judgment cache has its own module: tests/llm/test_faults_api.py.)
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from fixtures_retrieval import TEXTS, encoder

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.retrieval import vector_cache
from evalkit.retrieval.embeddings import Encoder
from evalkit.retrieval.vector_cache import EmbeddingCache


def filled(tmp_path) -> tuple[Encoder, np.ndarray]:
    enc = encoder(tmp_path)
    return enc, enc.encode(TEXTS)


# --- checks on write ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_vectors_are_never_stored(tmp_path, bad):
    cache = EmbeddingCache(tmp_path / "e.sqlite", "fp")
    vector = np.ones(8, dtype=np.float32)
    vector[3] = bad
    with pytest.raises(KitError, match="NaN or infinite"):
        cache.put({"a": np.ones(8), "b": vector})
    assert cache.get(["a", "b"]) == {}  # nothing of the batch stored


def test_a_vector_of_another_dimension_is_refused(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.sqlite", "fp")
    cache.put({"a": np.ones(8)})
    with pytest.raises(KitError, match="4-dimensional vectors where the cache holds 8"):
        cache.put({"b": np.ones(4)})
    with pytest.raises(KitError, match="shape"):
        cache.put({"c": np.ones((2, 4))})
    assert EmbeddingCache(tmp_path / "e.sqlite", "fp").dim == 8  # recorded in the file


# --- checks on read: damaged vectors are encoded again, the result unchanged --------------------------


@pytest.mark.parametrize("damage", ["short", "odd-bytes", "nan", "empty"])
def test_damaged_vectors_are_encoded_again(tmp_path, damage, capsys):
    enc, expected = filled(tmp_path)
    blob = {"short": np.ones(4, dtype=np.float32).tobytes(), "odd-bytes": b"\x00" * 31,
            "nan": np.full(8, np.nan, dtype=np.float32).tobytes(), "empty": b""}[damage]
    db = sqlite3.connect(enc.cache.path)
    with db:
        db.execute("UPDATE vectors SET vector = ? WHERE key = ?", (blob, enc.cache.key(TEXTS[5])))
    db.close()
    fresh = encoder(tmp_path)  # a new process: only the cache file
    again = fresh.encode(TEXTS)
    assert fresh._model.calls == 1  # the damaged vector only
    np.testing.assert_array_equal(again, expected)
    assert "1 damaged vectors" in capsys.readouterr().err
    third = encoder(tmp_path)
    np.testing.assert_array_equal(third.encode(TEXTS), expected)
    assert third._model.calls == 0  # replaced in the file


def test_rows_swapped_with_their_checksums_are_encoded_again(tmp_path, capsys):
    """A checksum bound to the row's key: two rows' (vector, checksum) exchanged check under neither key
    (an unkeyed checksum passed both, serving each text the other's vector)."""
    enc, expected = filled(tmp_path)
    a, b = enc.cache.key(TEXTS[3]), enc.cache.key(TEXTS[7])
    db = sqlite3.connect(enc.cache.path)
    with db:
        rows = dict((k, (v, c)) for k, v, c in db.execute(
            "SELECT key, vector, checksum FROM vectors WHERE key IN (?, ?)", (a, b)))
        for key, other in ((a, b), (b, a)):
            db.execute("UPDATE vectors SET vector = ?, checksum = ? WHERE key = ?", (*rows[other], key))
    db.close()
    fresh = encoder(tmp_path)
    np.testing.assert_array_equal(fresh.encode(TEXTS), expected)
    assert fresh._model.calls == 2
    assert "2 damaged vectors" in capsys.readouterr().err


def test_a_null_checksum_is_not_trusted(tmp_path, capsys):
    """Fail closed: a row without a checksum (no release wrote one) is encoded again, never read as is."""
    enc, expected = filled(tmp_path)
    db = sqlite3.connect(enc.cache.path)
    with db:
        db.execute("UPDATE vectors SET vector = ?, checksum = NULL WHERE key = ?",
                   (np.zeros(8, dtype=np.float32).tobytes(), enc.cache.key(TEXTS[4])))
    db.close()
    fresh = encoder(tmp_path)
    np.testing.assert_array_equal(fresh.encode(TEXTS), expected)
    assert fresh._model.calls == 1 and "1 damaged vectors" in capsys.readouterr().err


def test_a_vector_moved_to_another_fingerprint_is_not_used(tmp_path):
    """The checksum covers the file's fingerprint: a row under another model's fingerprint fails it."""
    EmbeddingCache(tmp_path / "e.sqlite", "model-a").put({"k": np.ones(8)})
    assert EmbeddingCache(tmp_path / "e.sqlite", "model-b").get(["k"]) == {}
    assert list(EmbeddingCache(tmp_path / "e.sqlite", "model-a").get(["k"])) == ["k"]


def test_a_vectors_table_without_checksums_is_one_line(tmp_path):
    path = tmp_path / "e.sqlite"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vector BLOB)")
        db.execute("INSERT INTO vectors VALUES ('k', ?)", (np.ones(8, dtype=np.float32).tobytes(),))
    db.close()
    with pytest.raises(KitError) as info:
        EmbeddingCache(path, "fp")
    assert str(info.value) == (f"{path}: not an embedding cache of this kit (its vectors table has no checksum "
                               "column); delete e.sqlite to rebuild it (its texts are encoded again)")


# --- damaged, read-only and full files: one line naming the file ----------------------------------------


def test_a_garbage_cache_file_names_the_file_and_the_fix(tmp_path):
    enc, _ = filled(tmp_path)
    path = enc.cache.path
    enc.cache.db.close()
    path.write_bytes(b"this is not an sqlite file" * 100)
    with pytest.raises(KitError) as info:
        encoder(tmp_path).encode(TEXTS)
    message = str(info.value)
    assert str(path) in message and f"delete {path.name} to rebuild it" in message and "\n" not in message


def test_a_truncated_cache_file_names_the_file_and_the_fix(tmp_path):
    enc, expected = filled(tmp_path)
    path = enc.cache.path
    enc.cache.db.close()
    body = path.read_bytes()
    assert len(body) > 8192
    path.write_bytes(body[: len(body) // 3])
    with pytest.raises(KitError) as info:
        encoder(tmp_path).encode(TEXTS)
    assert str(path) in str(info.value) and "damaged" in str(info.value)
    path.unlink()  # the fix the message names: the same vectors again
    np.testing.assert_array_equal(encoder(tmp_path).encode(TEXTS), expected)


def test_a_read_only_cache_file_names_the_file(tmp_path, monkeypatch):
    """Root writes through chmod, so the file is opened read-only (SQLite's own read-only mode)."""
    enc, expected = filled(tmp_path)
    path = enc.cache.path
    real_connect = sqlite3.connect
    monkeypatch.setattr(vector_cache.sqlite3, "connect",
                        lambda target, *a, **k: real_connect(f"file:{target}?mode=ro", uri=True))
    reader = encoder(tmp_path)
    np.testing.assert_array_equal(reader.encode(TEXTS), expected)  # reading still works
    with pytest.raises(KitError) as info:
        reader.encode(["a text never encoded"])
    assert str(path) in str(info.value) and "read-only" in str(info.value)


def test_a_full_disk_names_the_file(tmp_path):
    """SQLite's page limit gives the error a full disk gives (SQLITE_FULL)."""
    cache = EmbeddingCache(tmp_path / "e.sqlite", "fp")
    cache.put({"a": np.ones(8)})
    pages = cache.db.execute("PRAGMA page_count").fetchone()[0]
    cache.db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(KitError) as info:
        cache.put({f"k{i}": np.ones(8) for i in range(2000)})
    assert str(tmp_path / "e.sqlite") in str(info.value) and "no space left" in str(info.value)
    assert cache.get(["k1"]) == {}  # the batch rolled back


def test_a_cache_folder_that_cannot_be_made_names_it(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(KitError, match="file/embeddings/e.sqlite"):
        EmbeddingCache(tmp_path / "file" / "embeddings" / "e.sqlite", "fp")


# --- through the command: one line, status 2 -------------------------------------------------------------


@pytest.mark.parametrize("fault", ["garbage", "sqlite-error"])
def test_cache_faults_through_the_command_are_one_line(tmp_path, monkeypatch, capsys, fault):
    from fixtures_datasets import write_beir

    path = tmp_path / "e.sqlite"
    path.write_bytes(b"garbage" * 1000)

    def compute(bound):
        if fault == "garbage":
            EmbeddingCache(path, "fp")
        raise sqlite3.OperationalError("database or disk is full")  # a cache without the kit's wrapper

    monkeypatch.setattr("evalkit.pipeline.runner.compute", compute)
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("evalkit: error: ")
    assert (str(path) if fault == "garbage" else "disk is full") in err
