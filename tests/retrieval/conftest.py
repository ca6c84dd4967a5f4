"""Fixtures of the Ray executor's tests (test_ray_*.py): the tiny local sentence-transformers
model and small index batches, so that a corpus of tens of documents makes several batches."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_drivers import BATCH, SEARCH_ROWS
from tiny_models import build_sentence_transformer

from evalkit.retrieval import vector_index


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    """A tiny sentence-transformers model in a folder (no hub)."""
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def module_batches():
    """`BATCH` for a module-scoped fixture's own runs (set up before `small_batches`)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(vector_index, "BATCH", BATCH)
        yield BATCH


@pytest.fixture
def small_batches(monkeypatch, tmp_path):
    """Index batches of `BATCH` documents, the search in shards of `SEARCH_ROWS` rows on the
    workers, no progress bars, a cache folder of the test's own; no index verified yet."""
    monkeypatch.setattr(vector_index, "BATCH", BATCH)
    monkeypatch.setattr("evalkit.retrieval.ray_executor.SEARCH_ROWS", SEARCH_ROWS)  # by name: ray is an extra
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    vector_index._VERIFIED.clear()
