"""The Ray executor (issue 39): a whole corpus encoded and searched on a local Ray cluster of two
CPU workers, with the numbers of the in-process executor.

- `run.trec` (and the vector index's files) byte-identical in-process and with 1, 2 and 3 workers;
- a worker killed in the middle of a batch: Ray restarts it, the run is the same;
- a driver interrupted after some batches: the next run resumes, and no document of a committed
  batch is encoded again;
- a worker that cannot load the model: one line naming the worker and the cause;
- the shard-by-shard search merged per query equals the whole search, ties at the cut-off too.

One cluster for the module (started once: Ray's start is seconds), a tiny local model, batches
of 8 documents so that a 60-document corpus makes 8 batches.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from fixtures_retrieval import planted
from tiny_models import WORDS, build_sentence_transformer

from evalkit.core.errors import API, CLI, KitError, MissingPrerequisite, RequestError
from evalkit.data.collection import Collection, Document, Query
from evalkit.data.runstore import SIDECAR
from evalkit.models.dense import BiEncoder
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain
from evalkit.pipeline.settings import check_execution
from evalkit.retrieval import exact_search, executors, vector_index
from evalkit.retrieval.corpus import Corpus, rank_corpus
from evalkit.retrieval.embeddings import Encoder

ray = pytest.importorskip("ray")

from evalkit.retrieval import ray_executor  # noqa: E402  (after the skip: ray is an optional extra)
from evalkit.retrieval.ray_executor import RayExecutor  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get this module's classes by value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    os.environ.setdefault(ray_executor.START_WAIT_ENV, ray_executor.START_WAIT_S)  # a loaded machine starts slowly
    for attempt in range(3):  # Ray gives its node 30 s to register: a loaded machine may need another try
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(autouse=True)
def small_batches(monkeypatch, tmp_path):
    monkeypatch.setattr(vector_index, "BATCH", 8)
    monkeypatch.setattr(ray_executor, "SEARCH_ROWS", 16)  # the search too in shards, on the workers
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    vector_index._VERIFIED.clear()


def documents(n: int = 60) -> list[Document]:
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for _ in range(n // 2)]
    texts += texts[: n - len(texts)]  # every text twice, under two ids: exact ties
    ids = [f"d{i:03d}" for i in rng.permutation(n)]
    return [Document(d, "", t) for d, t in zip(ids, texts)]


def collection() -> Collection:
    docs = {d.doc_id: d for d in documents()}
    queries = {f"q{j}": Query(f"q{j}", " ".join(WORDS[j::7][:3])) for j in range(5)}
    return Collection(name="ray-corpus", documents=docs, queries=queries, qrels={q: {"d000": 1} for q in queries},
                      checksum="ray-corpus-1")


def index_bytes(cache: Path) -> dict[str, bytes]:
    folders = [p for p in (cache / "indexes").glob("dense-*") if p.is_dir() and "." not in p.name]  # not .lock
    assert len(folders) == 1
    return {p.name: p.read_bytes() for p in sorted(folders[0].iterdir())}


def test_the_run_is_byte_identical_in_process_and_with_1_2_3_workers(cluster, tiny, tmp_path, monkeypatch):
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"profiles": {"test": {"first_stage": "tiny", "depth": 3, "models": {
        "tiny": {"family": "dense", "model": str(tiny)}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(models))
    made = {}
    for executor, workers in (("local", None), ("ray", 1), ("ray", 2), ("ray", 3)):
        name = f"{executor}-{workers}"
        monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / name / "cache"))  # each encodes the corpus anew
        settings = RunSettings(model="tiny", dataset="ray-corpus", profile="test", executor=executor, workers=workers)
        folder = obtain(bind(settings, collection(), tmp_path / name / "runs"), Reuse.NEVER).folder
        sidecar = json.loads((folder / SIDECAR).read_text())
        made[name] = ((folder / "run.trec").read_bytes(), index_bytes(tmp_path / name / "cache"), sidecar)
    trec, index, sidecar = made["local-None"]
    assert len(trec.splitlines()) == 5 * 60 and sidecar["execution"] == {"executor": "local"}
    for name in ("ray-1", "ray-2", "ray-3"):
        assert made[name][0] == trec, name  # the run, byte for byte
        assert made[name][1] == index, name  # and the index's files (vectors, ids, meta.json)
        execution = made[name][2]["execution"]
        assert execution["executor"] == "ray" and execution["workers"] == int(name[-1])
        assert execution["vectors"] == "shared path" and execution["nodes"]
        assert {k: v for k, v in made[name][2].items() if k != "execution"} == \
            {k: v for k, v in sidecar.items() if k != "execution"}  # the key does not know the executor
        assert "executor" not in made[name][2]["run_settings"]


class Flaky:
    """A sentence-transformers model that logs each text it encodes and, in a worker, dies (the
    whole process) in the middle of its first batch when `crash` names a marker not yet made."""

    def __init__(self, model, log: Path, crash: Path | None, driver: int):
        self.model, self.log, self.crash, self.driver = model, log, crash, driver

    def encode(self, texts, **kwargs):
        if self.crash is not None and not self.crash.exists() and os.getpid() != self.driver:
            self.crash.write_text("crashed")
            with open(self.log, "a") as fh:
                fh.write("".join(f"{t}\n" for t in texts[: len(texts) // 2]))
            os._exit(1)
        with open(self.log, "a") as fh:
            fh.write("".join(f"{t}\n" for t in texts))
        return self.model.encode(texts, **kwargs)


class LoggedEncoder(Encoder):
    """`Encoder` whose model is wrapped in `Flaky`."""

    def __init__(self, location: str, log: Path, crash: Path | None = None):
        super().__init__(location)
        self.log, self.crash, self.driver = log, crash, os.getpid()

    @property
    def model(self):
        return Flaky(super().model, self.log, self.crash, self.driver)


def ranked_by(executor, tiny: Path, log: Path, crash: Path | None = None):
    scorer = BiEncoder(LoggedEncoder(str(tiny), log, crash), doc_template="{text} [{title}]")
    corpus = Corpus.of_documents(documents())
    queries = list(collection().queries.values())
    with executor:
        return rank_corpus(scorer, queries, corpus, 7, {"q1": "d003"}, executor=executor)


def test_a_worker_killed_mid_batch_is_restarted_and_the_ranking_is_the_same(cluster, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "local"))
    want = ranked_by(executors.IN_PROCESS, tiny, tmp_path / "local.log")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "ray"))
    crash = tmp_path / "crashed"
    got = ranked_by(RayExecutor(2), tiny, tmp_path / "ray.log", crash)
    assert crash.exists()  # a worker died in the middle of a batch (os._exit), and Ray restarted it
    assert got == want and {q: list(s) for q, s in got.items()} == {q: list(s) for q, s in want.items()}
    assert index_bytes(tmp_path / "ray") == index_bytes(tmp_path / "local")


def test_a_driver_interrupted_after_some_batches_resumes_without_encoding_them_again(cluster, tiny, tmp_path,
                                                                                     monkeypatch):
    write_meta, commits = vector_index._write_meta, []

    def interrupted(folder, rows, *args, complete, **kwargs):
        write_meta(folder, rows, *args, complete=complete, **kwargs)
        commits.append(rows)
        if len(commits) == 3:
            raise KeyboardInterrupt  # the driver stops after its third commit (Ctrl-C, a kill)

    monkeypatch.setattr(vector_index, "_write_meta", interrupted)
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    with pytest.raises(KeyboardInterrupt) as stopped:
        ranked_by(RayExecutor(2), tiny, first)
    assert stopped.traceback[-1].name == "interrupted"  # raised by the commit above, nothing else
    committed = vector_index.read_meta(next(p for p in (tmp_path / "cache" / "indexes").glob("dense-*")
                                            if p.is_dir() and "." not in p.name))  # not .lock, .shards
    assert committed["rows"] == 24 and not committed["complete"]
    monkeypatch.setattr(vector_index, "_write_meta", write_meta)
    got = ranked_by(RayExecutor(2), tiny, second)
    texts = {f"{d.text} [{d.title}]": d.doc_id for d in documents()}
    again = set(second.read_text().splitlines()) & set(texts) if second.exists() else set()  # not the queries
    done = {d.doc_id for d in documents()[:24]}
    assert not {texts[t] for t in again} & done  # no document of a committed batch is encoded twice
    assert len(again) < len(texts)  # batches the workers finished before the stop came from their cache
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "local"))
    assert got == ranked_by(executors.IN_PROCESS, tiny, tmp_path / "local.log")
    assert index_bytes(tmp_path / "cache") == index_bytes(tmp_path / "local")


def test_a_worker_that_cannot_load_the_model_ends_the_run_in_one_line(cluster, tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    scorer = BiEncoder(Encoder(str(broken)))
    with pytest.raises(KitError) as caught, RayExecutor(2) as executor:
        rank_corpus(scorer, list(collection().queries.values()), Corpus.of_documents(documents()), 5,
                    executor=executor)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("Ray worker ") and " of 2" in message
    assert "broken-model" in message or "json" in message.lower()  # the cause


def test_the_shard_by_shard_search_merges_to_the_whole_search_ties_at_the_cut_off_included():
    collection_, table = planted("ties", docs=300, seed=2)  # few distinct vectors: ties at every cut-off
    corpus = Corpus.of_documents(list(collection_.documents.values()))
    index = vector_index.VectorIndex.open(corpus, lambda b: np.stack([table[d.doc_id] for d in b]), {"m": "ties"})
    queries = np.stack([table[f"query {j}"] for j in range(12)])
    exclude = [None, index.ids[5]] + [None] * 10
    similarity = lambda q, d: np.einsum("ij,j->i", d, q)  # noqa: E731
    for k in (1, 5, 40):
        whole = index.search(queries, k, exclude, "cosine", similarity)
        for size in (7, 64, 1000):
            parts = [index.search(queries, k, exclude, "cosine", similarity, span)
                     for span in exact_search.spans(len(index.ids), size)]
            merged = exact_search.merge_top(parts, k)
            assert [list(m.items()) for m in merged] == [list(w.items()) for w in whole], (k, size)
    tied = [list(w.values()) for w in index.search(queries, 5, exclude, "cosine", similarity)]
    assert any(len(set(scores)) < len(scores) for scores in tied)  # the cut-off falls inside ties


@pytest.mark.parametrize("executor, workers, field", [("spark", None, "executor"), ("ray", 0, "workers"),
                                                      ("ray", "2", "workers"), ("local", 2, "workers")])
def test_an_executor_request_the_kit_cannot_run_is_one_line_naming_the_field(executor, workers, field):
    with pytest.raises(RequestError) as caught:
        check_execution(executor, workers)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}=")
    assert str(caught.value.for_front_end(CLI)).startswith(f"--{field}")
    assert caught.value.front_end == API


def test_without_ray_the_executor_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "evalkit.retrieval.ray_executor")
    monkeypatch.delattr("evalkit.retrieval.ray_executor")
    with pytest.raises(MissingPrerequisite, match=r"evalkit\[cluster\]"):
        executors.executor_for("ray", 2)
