"""Every benchmark under bench/ still starts: its imports resolve and `--help` exits 0.

Benchmarks run by hand, so nothing else notices when a refactor moves a function they
import (bench_llm.py imported a removed `evalkit.data.runs.load_run` unnoticed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = sorted((Path(__file__).resolve().parents[2] / "bench").glob("bench_*.py"))


def test_there_are_benchmarks():
    assert len(BENCH) >= 4


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_benchmark_starts(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                          cwd=script.parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_floor_bench_keeps_exactly_the_texts_the_cache_holds_each_once(tmp_path, monkeypatch):
    """bench_floor.py times only what a make all encoded: of the candidate texts, those whose key
    (sha256 of fingerprint NUL text) the embedding cache holds, a text in two kinds kept in the
    first; cache rows no candidate matches are counted, never silently dropped."""
    import hashlib
    import importlib
    import sqlite3

    monkeypatch.syspath_prepend(str(BENCH[0].parent))
    floor = importlib.import_module("bench_floor")
    fingerprint = "f" * 16
    (tmp_path / "embeddings").mkdir()
    with sqlite3.connect(tmp_path / "embeddings" / f"{fingerprint}.sqlite") as db:
        db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vector BLOB, checksum TEXT)")
        for text in ("an abstract", "a sentence", "a query", "not a candidate"):
            key = hashlib.sha256(f"{fingerprint}\0{text}".encode()).hexdigest()
            db.execute("INSERT INTO vectors VALUES (?, NULL, NULL)", (key,))
    candidates = {"abstracts": {"an abstract", "never encoded"}, "sentences": {"a sentence", "an abstract"},
                  "queries": {"a query"}}
    found, unmatched = floor.encoded_texts(tmp_path, candidates, fingerprint)
    assert found == {"abstracts": ["an abstract"], "sentences": ["a sentence"], "queries": ["a query"]}
    assert unmatched == 1
