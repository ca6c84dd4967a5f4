"""What the API tests share: a fresh embedding cache and no user registry, and the tiny local
SentenceTransformer (built once per module)."""

from __future__ import annotations

import pytest
from tiny_models import build_sentence_transformer


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty embedding cache for the test, and the kit's own registry only."""
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(folder, SentenceTransformer) of a tiny random model of MiniLM's architecture."""
    from sentence_transformers import SentenceTransformer

    folder = build_sentence_transformer(tmp_path_factory.mktemp("tiny"))
    return folder, SentenceTransformer(str(folder), device="cpu")


@pytest.fixture(scope="module")
def tiny_model(tiny):
    """The tiny SentenceTransformer alone."""
    return tiny[1]
