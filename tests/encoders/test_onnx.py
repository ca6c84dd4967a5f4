"""The ONNX Runtime backend of `Encoder`: same vectors and rankings as PyTorch, cached export, own fingerprint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_models import WORDS, build_sentence_transformer

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from evalkit.core.errors import KitError  # noqa: E402
from evalkit.encoders import onnx as onnx_backend  # noqa: E402
from evalkit.retrieval.embeddings import Encoder  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny-onnx"))


def texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 90)))) for _ in range(count)]


def test_vectors_and_rankings_match_torch(tiny, tmp_path):
    docs, queries = texts(120), texts(12, seed=1)
    torch_enc = Encoder(str(tiny), cache_dir=tmp_path / "a", batch_size=16)
    onnx_enc = Encoder(str(tiny), cache_dir=tmp_path / "b", batch_size=16, backend="onnx")
    a_docs, b_docs = torch_enc.encode(docs), onnx_enc.encode(docs)
    a_q, b_q = torch_enc.encode(queries), onnx_enc.encode(queries)
    assert a_docs.shape == b_docs.shape == (120, 32)
    assert np.abs(a_docs - b_docs).max() < 1e-5 and np.abs(a_q - b_q).max() < 1e-5
    assert np.allclose(np.linalg.norm(b_docs, axis=1), 1.0, atol=1e-5)
    for qa, qb in zip(a_q, b_q):
        sa, sb = a_docs @ qa, b_docs @ qb
        order_a, order_b = np.argsort(-sa, kind="stable"), np.argsort(-sb, kind="stable")
        # equal rankings, up to documents whose scores tie within float32 rounding (identical texts)
        assert np.abs(sa[order_a] - sa[order_b]).max() < 1e-5
        gaps = np.abs(np.diff(sa[order_a])) > 1e-5
        alone = np.concatenate([[True], gaps]) & np.concatenate([gaps, [True]])  # no near-tie on either side
        assert alone.mean() > 0.5 and (order_a[alone] == order_b[alone]).all()


def test_export_cached_by_content_and_batching_invariant(tiny, tmp_path):
    cache = tmp_path / "cache"
    enc = Encoder(str(tiny), cache_dir=cache, backend="onnx", batch_size=7)
    many = texts(40, seed=2)
    together = enc.encode(many)
    exports = list((cache / "onnx").glob("*/model.onnx"))
    assert len(exports) == 1 and exports[0].parent.name == onnx_backend.export_key(tiny)
    mtime = exports[0].stat().st_mtime_ns
    alone = Encoder(str(tiny), cache_dir=tmp_path / "other", backend="onnx", batch_size=1)
    alone._onnx = onnx_backend.OnnxSentenceEncoder(tiny, cache)  # reuses the cached export
    assert exports[0].stat().st_mtime_ns == mtime
    assert np.abs(alone.onnx.encode(many, batch_size=1) - together).max() < 1e-5


def test_backend_in_fingerprint(tiny, tmp_path):
    torch_enc = Encoder(str(tiny), cache_dir=tmp_path)
    onnx_enc = Encoder(str(tiny), cache_dir=tmp_path, backend="onnx")
    assert torch_enc.fingerprint != onnx_enc.fingerprint
    assert onnx_enc.vectors.settings["backend"] == "onnx" and "backend" not in torch_enc.vectors.settings
    onnx_enc.encode(["graph neural network"])
    assert onnx_enc.texts_encoded == 1 and torch_enc.cache.get([torch_enc.cache.key("graph neural network")]) == {}
    again = Encoder(str(tiny), cache_dir=tmp_path, backend="onnx")
    again.encode(["graph neural network"])
    assert again.texts_encoded == 0  # served from the onnx fingerprint's cache


def test_bad_settings(tiny, tmp_path):
    with pytest.raises(KitError, match="backend"):
        Encoder(str(tiny), cache_dir=tmp_path, backend="tensorrt")
    with pytest.raises(KitError, match="devices"):
        Encoder(str(tiny), cache_dir=tmp_path, backend="onnx", devices=["cpu", "cpu"])


def test_registry_passes_backend(tiny):
    from evalkit.models.families.dense import encoder

    enc = encoder({"model": str(tiny), "backend": "onnx", "threads": 1})
    assert enc.backend == "onnx" and enc.threads == 1
