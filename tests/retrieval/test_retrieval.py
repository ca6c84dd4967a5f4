"""Whole-corpus retrieval (evalkit.retrieval.corpus, vector_index, exact_search): the index's resumable
streaming build, reuse across runs, float16 storage, the float32 error bound, BM25's index on disk,
and a runner without adapters."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from fixtures_retrieval import bm25_collection, exhaustive, planted, table_scorer

from evalkit.core.errors import KitError
from evalkit.data.runstore import SIDECAR
from evalkit.models.bm25 import BM25
from evalkit.pipeline import runner
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain
from evalkit.retrieval import exact_search, vector_index
from evalkit.retrieval.corpus import Corpus
from evalkit.retrieval.exact_search import error_bound
from evalkit.retrieval.vector_index import VectorIndex


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def counting(table):
    """An encode(documents) over `table` that counts the documents it encodes."""
    seen = []

    def encode(docs):
        seen.extend(d.doc_id for d in docs)
        return np.stack([table[d.doc_id] for d in docs])

    return encode, seen


def test_a_killed_build_resumes_after_its_last_batch_without_encoding_again(monkeypatch):
    collection, table = planted("gaussian", docs=10)
    corpus = Corpus.of_documents(list(collection.documents.values()))
    monkeypatch.setattr(vector_index, "BATCH", 3)
    encode, seen = counting(table)

    def killed(docs):
        if len(seen) >= 6:
            raise KeyboardInterrupt  # the kill, during the third batch
        return encode(docs)

    with pytest.raises(KeyboardInterrupt):
        VectorIndex.open(corpus, killed, {"model": "m"})
    folder = vector_index.index_folder("dense", {"model": "m", "corpus": corpus.key, "dtype": "float32"})
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["rows"], meta["complete"]) == (6, False)
    with open(folder / "vectors.bin", "ab") as fh:  # half a row written after the last commit
        fh.write(b"\0" * 10)
    seen.clear()
    index = VectorIndex.open(corpus, encode, {"model": "m"})
    assert seen == list(collection.documents)[6:]  # only the uncommitted documents were encoded
    assert index.ids == list(collection.documents)
    assert np.array_equal(np.asarray(index.rows), np.stack([table[d] for d in collection.documents]))
    seen.clear()
    VectorIndex.open(corpus, encode, {"model": "m"})
    assert seen == []  # a complete index is reused as it is


def test_prompt_runs_reuse_the_index_and_encode_only_their_queries(tmp_path):
    collection, table = planted("gaussian", docs=50)
    scorer = table_scorer(table, "cosine")
    corpus = Corpus.of_documents(list(collection.documents.values()))
    queries = list(collection.queries.values())
    scorer.search(queries, corpus, 5)
    assert scorer.encoder.calls == 50 + len(queries)
    fresh = table_scorer(table, "cosine")  # another run, another process: the index is on disk
    fresh.search(queries[:3], corpus, 5)
    assert fresh.encoder.calls == 3


def test_float16_index_halves_the_file_ranks_the_rounded_vectors_and_is_recorded(tmp_path, monkeypatch):
    collection, table = planted("gaussian", docs=80)
    corpus = Corpus.of_documents(list(collection.documents.values()))
    scorer = table_scorer(table, "l2")
    half = scorer.corpus_index(corpus, "float16")
    assert half.meta["dtype"] == "float16"
    assert (half.folder / "vectors.bin").stat().st_size == 80 * 12 * 2
    rounded = {k: v.astype(np.float16).astype(np.float32) for k, v in table.items()}
    got = scorer.search(list(collection.queries.values()), corpus, 10, dtype="float16")
    want = exhaustive(table_scorer({**table, **{d: rounded[d] for d in collection.documents}}, "l2"), collection, 10)
    assert {q: list(s.items()) for q, s in got.items()} == want
    with pytest.raises(KitError, match="not one of float32, float16"):
        scorer.corpus_index(corpus, "int8")


def test_the_run_records_the_index_dtype_in_its_name_and_sidecar(tmp_path, monkeypatch):
    from fixtures_datasets import write_beir
    from tiny_models import build_sentence_transformer

    from evalkit.datasets.beir import load_beir

    model = build_sentence_transformer(tmp_path / "models")
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"profiles": {"test": {"first_stage": "tiny", "depth": 3, "models": {
        "tiny": {"family": "dense", "model": str(model)}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(models))
    collection = load_beir(write_beir(tmp_path / "beir"))
    folder = obtain(bind(RunSettings(model="tiny", dataset=collection.name, profile="test", index_dtype="float16"),
                     collection, tmp_path / "r"), Reuse.NEVER).folder
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert folder.name == "tiny--index-float16"
    assert sidecar["run_settings"]["index_dtype"] == "float16" and sidecar["corpus_size"] == 6
    with pytest.raises(KitError, match="index_dtype='int8': is not one of"):
        obtain(bind(RunSettings(model="tiny", dataset=collection.name, profile="test", index_dtype="int8"),
                collection, tmp_path / "r"), Reuse.NEVER)


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_the_blocked_scores_stay_within_the_error_bound_of_the_exact_ones(metric):
    rng = np.random.default_rng(5)
    docs = (rng.standard_normal((3000, 384)) * rng.uniform(0.1, 30, size=(3000, 1))).astype(np.float32)
    queries = (rng.standard_normal((40, 384)) * 7).astype(np.float32)
    scorer = table_scorer({}, metric)
    blocked = queries @ docs.T
    exact = np.stack([scorer.similarity(q, docs) for q in queries]).astype(np.float64)
    if metric == "l2":  # the blocked score is -|q-d|^2 + |q|^2; compare in that space
        blocked = 2 * blocked - np.einsum("ij,ij->i", docs, docs, dtype=np.float32)[None]
        exact = -exact ** 2 + (queries.astype(np.float64) ** 2).sum(1)[:, None]
    bound = error_bound(metric, 384, np.linalg.norm(queries.astype(np.float64), axis=1),
                        float(np.linalg.norm(docs.astype(np.float64), axis=1).max()))
    gap = np.abs(blocked.astype(np.float64) - exact).max(axis=1)
    assert (gap > 0).any() and (gap <= bound).all()


def test_a_small_search_block_still_gives_the_exhaustive_top_k(monkeypatch):
    collection, table = planted("ties", docs=500, seed=4)
    monkeypatch.setattr(vector_index, "SCORE_CELLS", 12 * 64)  # many blocks, many query batches
    scorer = table_scorer(table, "cosine")
    got = scorer.search(list(collection.queries.values()), Corpus.of_documents(list(collection.documents.values())),
                        30)
    assert {q: list(s.items()) for q, s in got.items()} == exhaustive(scorer, collection, 30)


@pytest.mark.parametrize("kind", ["ties", "gaussian"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_the_gpu_block_stage_run_in_torch_on_the_cpu_gives_the_same_top_k(monkeypatch, kind, metric):
    """`torch_hits` (the GPU path's products and hit selection) over many blocks, a query's own
    document excluded: the same rankings and scores as the numpy stage and the exhaustive path."""
    collection, table = planted(kind, docs=400, seed=6)
    monkeypatch.setattr(vector_index, "SCORE_CELLS", 12 * 64)
    scorer = table_scorer(table, metric)
    queries, corpus = list(collection.queries.values()), Corpus.of_documents(list(collection.documents.values()))
    exclude = {q.qid: d for q, d in zip(queries, collection.documents)}
    numpy_stage = scorer.search(queries, corpus, 30, exclude)
    monkeypatch.setattr(vector_index, "block_hits", lambda device, *args: exact_search.torch_hits("cpu", *args))
    torch_stage = scorer.search(queries, corpus, 30, exclude)
    assert torch_stage == numpy_stage
    assert {q: list(s.items()) for q, s in torch_stage.items()} == exhaustive(scorer, collection, 30, exclude)


def test_search_device_follows_the_variable_else_a_visible_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("EVALKIT_SEARCH_DEVICE", "cuda:1")
    assert exact_search.search_device() == "cuda:1"
    monkeypatch.delenv("EVALKIT_SEARCH_DEVICE")
    assert exact_search.search_device() == "cuda"


def test_bm25_index_is_kept_on_disk_and_read_back_equal(tmp_path):
    collection = bm25_collection(docs=120)
    corpus = Corpus.of_documents(list(collection.documents.values()))
    queries = list(collection.queries.values())
    first = BM25().search(queries, corpus, 25)
    folders = [p for p in (tmp_path / "cache" / "indexes").glob("bm25-*") if p.is_dir()]
    assert len(folders) == 1 and (folders[0] / "ids.json").is_file()
    again = BM25()
    again._new_index = None  # reading the stored index must not build another
    assert again.search(queries, corpus, 25) == first
    assert BM25(k1=1.2).corpus_index(corpus)[1].k1 == 1.2  # other settings: another index


def test_the_generic_runner_imports_no_dataset_adapter():
    tree = ast.parse(Path(runner.__file__).read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m and m.startswith("evalkit.datasets")]
