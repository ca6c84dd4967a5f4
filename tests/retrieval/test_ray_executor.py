"""The Ray executor (issue 39): a whole corpus encoded and searched on a local Ray cluster of two
CPU workers, with the numbers of the in-process executor.

- `run.trec` (and the vector index's files) byte-identical in-process and with 1, 2 and 3 workers,
  and with 2 workers whose vectors come back through Ray's object store (forced, and decided by the
  probe when no worker sees the driver's cache folder);
- a worker killed in the middle of a batch: Ray restarts it, the run is the same;
- a driver interrupted after some batches: the next run resumes, and no document of a committed
  batch is encoded again;
- a driver process killed (SIGKILL) between its commits, joined to the cluster or running a local
  cluster it started itself: its workers end (its own cluster: every process of it, Ray's agents
  included, within seconds: the kit's reaper), its lock and its batch files do not stop the next
  run, which resumes, encodes no document of a committed batch again and makes the run of a
  clean in-process build;
- a worker that cannot load the model: one line naming the worker and the cause;
- the shard-by-shard search merged per query equals the whole search, ties at the cut-off too;
- (issue 48 item 10) the vectors do not depend on the executor's thread count or on which batch
  a model input is in; `--workers` beyond the cluster, odd or unreachable ``RAY_ADDRESS`` values
  and a model pickle cannot send: one line each, within seconds, before any worker starts;
- (issue 48 item 11) more workers than documents; two Ray driver processes and an in-process run
  of one index and one run store at once: the in-process bytes, one run folder, one index.
  The kit's own local cluster started in a process of its own: test_ray_local.py.

One cluster for the module (started once: Ray's start is seconds), a tiny local model, batches
of 8 documents so that a 60-document corpus makes 8 batches.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import ray_drivers
from fixtures_retrieval import planted
from ray_drivers import HELD, alive, beir_folder, distinct_documents, drive, index_bytes, named, start_driver
from tiny_models import WORDS

from evalkit.core.errors import API, CLI, KitError, MissingPrerequisite, RequestError
from evalkit.data.collection import Collection, Document, Query
from evalkit.data.runstore import SIDECAR
from evalkit.models.dense import BiEncoder
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain
from evalkit.pipeline.settings import check_execution
from evalkit.retrieval import exact_search, executors, vector_index
from evalkit.retrieval.corpus import Corpus, rank_corpus
from evalkit.retrieval.embeddings import CachedVectors, Encoder

ray = pytest.importorskip("ray")

from evalkit.retrieval import ray_executor  # noqa: E402  (after the skip: ray is an optional extra)
from evalkit.retrieval.ray_executor import RayExecutor  # noqa: E402

psutil = pytest.importorskip("psutil")  # Ray's own dependency

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get this module's classes by value
ray.cloudpickle.register_pickle_by_value(ray_drivers)

pytestmark = pytest.mark.usefixtures("small_batches")  # tests/retrieval/conftest.py: `tiny`, `small_batches`


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    os.environ.setdefault(ray_executor.START_WAIT_ENV, ray_executor.START_WAIT_S)  # a loaded machine starts slowly
    for attempt in range(3):  # Ray gives its node 30 s to register: a loaded machine may need another try
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield
    ray.shutdown()


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


def test_the_run_is_byte_identical_in_process_and_with_1_2_3_workers(cluster, tiny, tmp_path, monkeypatch):
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"profiles": {"test": {"first_stage": "tiny", "depth": 3, "models": {
        "tiny": {"family": "dense", "model": str(tiny)}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(models))
    made = {}
    # 2 workers three times: through the cache folder, then (the workers of the run before, kept
    # idle) through Ray's object store, forced, and decided by the probe: every worker reads another
    # file at the probe's path, as a worker on a node that does not see the driver's cache folder
    write_text = Path.write_text

    def on_another_node(path, text, *args, **kwargs):
        return write_text(path, "another node's file" if path.name.startswith("ray-probe-") else text, *args, **kwargs)

    for executor, workers, vectors in (("local", None, None), ("ray", 1, None), ("ray", 2, None),
                                       ("ray", 2, "object-store"), ("ray", 2, "unseen"), ("ray", 3, None)):
        name = f"{executor}-{workers}" + (f"-{vectors}" if vectors else "")
        monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / name / "cache"))  # each encodes the corpus anew
        monkeypatch.setattr(Path, "write_text", on_another_node if vectors == "unseen" else write_text)
        if vectors == "object-store":
            monkeypatch.setenv(ray_executor.VECTORS_ENV, vectors)
        else:
            monkeypatch.delenv(ray_executor.VECTORS_ENV, raising=False)
        settings = RunSettings(model="tiny", dataset="ray-corpus", profile="test", executor=executor, workers=workers)
        folder = obtain(bind(settings, collection(), tmp_path / name / "runs"), Reuse.NEVER).folder
        monkeypatch.setattr(Path, "write_text", write_text)
        sidecar = json.loads((folder / SIDECAR).read_text())
        made[name] = ((folder / "run.trec").read_bytes(), index_bytes(tmp_path / name / "cache"), sidecar)
        assert not list((tmp_path / name / "cache" / "indexes").glob("*.shards"))  # no batch file left
    trec, index, sidecar = made["local-None"]
    assert len(trec.splitlines()) == 5 * 60 and sidecar["execution"] == {"executor": "local"}
    for name in ("ray-1", "ray-2", "ray-2-object-store", "ray-2-unseen", "ray-3"):
        assert made[name][0] == trec, name  # the run, byte for byte
        assert made[name][1] == index, name  # and the index's files (vectors, ids, meta.json)
        execution = made[name][2]["execution"]
        assert execution["executor"] == "ray" and execution["workers"] == int(name[4])
        through = "object store" if name.endswith(("object-store", "unseen")) else "shared path"
        assert execution["vectors"] == through and execution["nodes"], name
        said = {"ray-2-object-store": "Ray object store (EVALKIT_RAY_VECTORS=object-store)",
                "ray-2-unseen": "Ray object store (no path every worker sees)"}.get(name, "cache folder")
        assert any(f"came back through the {said}" in note for note in execution["notes"]), execution["notes"]
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
    assert len(again) <= ray_executor.IN_FLIGHT * 2 * 8  # at most the batches in flight at the stop, again
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "local"))
    assert got == ranked_by(executors.IN_PROCESS, tiny, tmp_path / "local.log")
    assert index_bytes(tmp_path / "cache") == index_bytes(tmp_path / "local")


REAPED_S = 15  # seconds within which every process of a killed driver's own local cluster has ended


@pytest.mark.parametrize("its_own", [False, True], ids=["joined", "its-own-local-cluster"])
def test_a_driver_killed_by_sigkill_leaves_nothing_in_the_way_and_the_rerun_encodes_no_committed_document(
        its_own, cluster, tiny, tmp_path, monkeypatch, capfd):
    """A driver process (`drive`, 2 workers, joined to this module's cluster by RAY_ADDRESS, or
    running a local cluster it started itself) is killed once 2 of the 6 batches are committed,
    while worker 1 waits on the third and worker 2 has encoded the fourth and the sixth (their
    vectors in batch files beside the index, not committed). Its workers end (joined: Ray ends
    them; its own cluster: every process of the cluster, Ray's agents included, within `REAPED_S`
    seconds, counted), nothing waits for its lock, and the next run, same settings, in this
    process, makes the run and the index of a clean in-process build: no document of a committed
    batch is encoded again, those of the batches encoded but not committed once more (a build
    keeps vectors only in the index: no embedding cache, `vector_index.batch_plan`)."""
    dataset, log, release = beir_folder(tmp_path / "beir"), tmp_path / "held.log", tmp_path / "release"
    if not its_own:
        kept = sum(map(len, ray_executor._IDLE.values()))
        assert ray_executor.release_workers() == kept  # this process's idle workers would hold the cluster's 2 CPUs
        assert not ray_executor._IDLE and ray_executor.release_workers() == 0
    driver = start_driver([str(tiny), str(dataset), str(tmp_path / "runs"), str(log), str(release)], tmp_path,
                          None if its_own else ray.get_runtime_context().gcs_address)
    indexes, deadline = tmp_path / "cache" / "indexes", time.monotonic() + 180
    try:
        while True:  # the commits, read from the index folder
            assert driver.poll() is None, (tmp_path / "driver.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "the driver never reached its third batch"
            folders = [p for p in indexes.glob("dense-*") if p.is_dir() and "." not in p.name]
            meta = vector_index.read_meta(folders[0]) if folders else None
            shards = list(Path(f"{folders[0]}.shards").glob("*.npy")) if folders else []
            if meta and meta["rows"] == 16 and (tmp_path / "held").exists() and len(shards) == 2:
                break
            time.sleep(0.05)
        workers = {int(p) for p in log.with_suffix(".pids").read_text().split()}
        started = {p.pid for p in psutil.Process(driver.pid).children(recursive=True)}  # its cluster: GCS, raylet...
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait()
    assert not vector_index.read_meta(folders[0])["complete"] and len(workers) == 2
    assert workers <= started if its_own else not workers & started
    killed, bound = time.monotonic(), REAPED_S if its_own else 60
    while left := [pid for pid in workers | started if alive(pid)]:  # Ray ends the workers; the reaper the rest
        assert time.monotonic() - killed < bound, f"processes of the killed driver left after {bound} s: {named(left)}"
        time.sleep(0.1)
    with open(f"{folders[0]}.lock") as lock:  # the killed driver's lock on the index is free (never a wait)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    first = Counter(log.read_text().splitlines())
    release.touch()
    capfd.readouterr()
    folder = drive(str(tiny), str(dataset), str(tmp_path / "runs"), str(log), str(release))
    assert "waiting for another process" not in capfd.readouterr().err  # the killed driver's lock is gone
    assert not Path(f"{folders[0]}.shards").exists()  # its batch files: removed
    execution = json.loads((folder / SIDECAR).read_text())["execution"]
    assert execution["executor"] == "ray" and execution["workers"] == 2 and execution["vectors"] == "shared path"
    texts = [d.text for d in distinct_documents()]
    both = Counter(log.read_text().splitlines())
    again = texts[24:32] + texts[40:]  # batches 4 and 6: encoded, not committed
    assert {t: both[t] for t in texts} == {t: 2 if t in again else 1 for t in texts}
    assert {t for t in texts[:16] + texts[24:32] + texts[40:]} <= set(first)  # batches 1, 2, 4, 6 before the kill
    assert not set(first) & set(texts[HELD])  # the held batch was never encoded before the kill

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "local"))
    clean = drive(str(tiny), str(dataset), str(tmp_path / "runs-local"), str(tmp_path / "local.log"), str(release),
                  executor="local")
    assert (folder / "run.trec").read_bytes() == (clean / "run.trec").read_bytes()
    assert index_bytes(tmp_path / "cache") == index_bytes(tmp_path / "local")


def test_more_workers_than_documents_give_the_in_process_bytes(cluster, tiny, tmp_path, monkeypatch):
    """(issue 48 item 11) 2 workers (the idle ones of the run before, when there are) and 1
    document, one batch of it: the ranking and the index of the in-process run. (More workers
    than this cluster holds, 5 of at most 4, is one line: the test below.)"""
    docs, queries = distinct_documents(1), list(collection().queries.values())
    found = {}
    for name, executor in (("local", executors.IN_PROCESS), ("ray", RayExecutor(2))):
        monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / name))
        with executor:
            ranked = rank_corpus(BiEncoder(Encoder(str(tiny))), queries, Corpus.of_documents(docs), 7,
                                 executor=executor)
        found[name] = ({q: list(s.items()) for q, s in ranked.items()}, index_bytes(tmp_path / name))
    assert executor.describe()["workers"] == 2 and executor.describe()["vectors"] == "shared path"
    assert found["ray"] == found["local"] and all(len(s) == 1 for s in found["ray"][0].values())


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


# --- issue 48 item 10: numbers that do not depend on the executor's choices; one line for what cannot run ----------

class ThreadSensitive:
    """An encoder (`BiEncoder`'s interface) whose vectors move with torch's thread count and with
    the size of the batch they are encoded in, as a real model's last bits do on the CPU."""

    location, revision = "thread-sensitive", "1"

    def __init__(self):
        self.vectors = CachedVectors({"model": self.location})
        self.fingerprint = self.vectors.fingerprint

    def compute(self, texts) -> np.ndarray:
        import torch

        rows = np.asarray([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        return rows + np.float32(1e-3) * len(texts) + np.float32(1e-2) * torch.get_num_threads()

    def encode(self, texts, desc: str = "texts") -> np.ndarray:
        return self.vectors.stack(list(texts), str, self.compute)


def test_the_vectors_do_not_depend_on_thread_counts_or_on_which_batch_an_input_is_in(cluster, tmp_path, monkeypatch):
    """2 workers on a cluster of 2 CPUs (a share of one core each) give the bytes of the in-process
    build, whose torch runs 3 threads here; a document whose abstract another has under another title
    (one model input under ``{abstract}``) three batches later ties with it exactly on both."""
    torch = pytest.importorskip("torch")
    docs = distinct_documents(40)
    docs += [Document(f"r{d.doc_id}", "another title", d.text) for d in docs[:4]]  # batch 1's inputs, in batch 6
    corpus, queries = Corpus.of_documents(docs), list(collection().queries.values())
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        for name, executor in (("local", executors.IN_PROCESS), ("ray", RayExecutor(2))):
            monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / name))
            with executor:
                rank_corpus(BiEncoder(ThreadSensitive(), doc_template="{abstract}"), queries, corpus, 5,
                            executor=executor)
    finally:
        torch.set_num_threads(before)
    assert index_bytes(tmp_path / "ray") == index_bytes(tmp_path / "local")
    rows = np.frombuffer(index_bytes(tmp_path / "ray")["vectors.bin"], dtype=np.float32).reshape(len(docs), 3)
    assert rows[0, 2] == np.float32(1.0) + np.float32(8e-3) + np.float32(3e-2)  # 3 threads, a batch of 8
    for i in range(4):
        assert rows[i].tobytes() == rows[40 + i].tobytes()


def test_more_workers_than_a_cluster_holds_is_one_line_before_any_worker_starts(cluster, monkeypatch):
    executor = RayExecutor(5)  # this module's cluster: 2 CPUs, at most 2 workers each
    with pytest.raises(RequestError) as caught:
        executor._workers(lambda batch: None)
    assert str(caught.value) == ("workers=5: asks for 5 Ray workers; the cluster holds at most 4 (2 CPUs, at most "
                                 "2 workers per CPU): ask for at most 4")
    assert executor.actors == []
    cores = os.cpu_count() or 1
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # no cluster yet: the kit would start a local one
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("a local cluster was started"))
    with pytest.raises(RequestError, match=rf"^workers=1000000: asks for 1000000 Ray workers; a local cluster on this "
                                           rf"machine holds at most {2 * cores} \({cores} CPUs"):
        RayExecutor(1000000)._connect()


@pytest.fixture(scope="module")
def not_ray() -> int:
    """A port on this machine that answers, but not as Ray's head does (an HTTP/1 server)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(64)
                conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@pytest.mark.parametrize("address, said", [
    ("", "RAY_ADDRESS is set but empty"),
    ("127.0.0.1:6379\n", r"RAY_ADDRESS='127.0.0.1:6379\\n' holds whitespace \(a trailing newline\?\)"),
    (":99999", "RAY_ADDRESS=:99999 is not host:port with a port 1-65535"),
    ("127.0.0.1:²", "RAY_ADDRESS=127.0.0.1:² is not host:port with a port 1-65535"),
    ("127.0.0.1:1", r"nothing answers at RAY_ADDRESS=127.0.0.1:1 \(Connection refused\)"),
    ("not-ray", r"RAY_ADDRESS=127.0.0.1:\d+ answers, but not as a Ray head")])
def test_an_odd_or_unreachable_ray_address_is_one_line_within_seconds(address, said, not_ray, monkeypatch):
    address = f"127.0.0.1:{not_ray}" if address == "not-ray" else address
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray was asked to join"))
    monkeypatch.setenv("RAY_ADDRESS", address)
    start = time.monotonic()
    with pytest.raises(MissingPrerequisite, match=f"^{said}") as caught:
        RayExecutor(2)._connect()
    assert time.monotonic() - start < ray_executor.PROBE_S + 2 and "\n" not in str(caught.value)


def test_a_ray_head_passes_the_address_check(cluster):
    address = ray.get_runtime_context().gcs_address
    assert ray_executor.check_address(address) == address and ray_executor.check_address("auto") == "auto"


def test_a_model_that_cannot_be_sent_to_the_workers_is_one_line(cluster):
    lock = threading.Lock()  # a model holding what pickle cannot send (an open lock, a socket, a CUDA context)

    def encode(batch):
        with lock:
            return None

    executor = RayExecutor(2)
    with pytest.raises(RequestError) as caught:
        executor._workers(encode)
    assert str(caught.value) == ("executor= cannot send the model to Ray workers (TypeError: cannot pickle "
                                 "'_thread.lock' object); run it with executor='local'")
    assert executor.actors == []


# --- issue 48 item 11: runs of one index at once ----------------------------------------------------------------------

WAITING = "waiting for another process building the vector index"  # the lock's note (`evalkit.core.locks`)


def test_two_ray_drivers_and_an_in_process_run_at_once_give_the_in_process_bytes_and_one_store(
        cluster, tiny, tmp_path, capfd, monkeypatch):
    """Three runs of the same settings, one cache folder and one run store, at once: a Ray driver
    process (`drive`, 1 worker on this module's cluster: a second costs seconds, not a case)
    holding its third batch, a second Ray driver process on the same cluster, and an in-process
    run in this process. Both later ones
    wait on the index's lock (each says so), then use the finished index: the three runs are the
    run of a clean in-process build, byte for byte, in one run folder, beside one index and no
    batch file; the first driver's worker ends with it."""
    ray_executor.release_workers()  # this process's idle workers would hold the cluster's 2 CPUs
    dataset, log, release = beir_folder(tmp_path / "beir"), tmp_path / "held.log", tmp_path / "release"
    args, address = [str(tiny), str(dataset), str(tmp_path / "runs"), str(log), str(release)], \
        ray.get_runtime_context().gcs_address
    first = start_driver([*args, "ray", "1"], tmp_path, address, "first")
    deadline = time.monotonic() + 180
    while not (tmp_path / "held").exists():  # the first driver holds the index's lock, mid-build
        assert first.poll() is None, (tmp_path / "first.out").read_text()[-3000:]
        assert time.monotonic() < deadline, "the first driver never reached its third batch"
        time.sleep(0.05)
    second = start_driver([*args, "ray", "1"], tmp_path, address, "second")

    def release_once_the_second_waits():
        while WAITING not in (tmp_path / "second.out").read_text() and second.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        release.touch()

    releaser = threading.Thread(target=release_once_the_second_waits, daemon=True)
    releaser.start()
    capfd.readouterr()
    here = drive(*args, executor="local")  # waits on the lock too, then reads the finished index
    assert WAITING in capfd.readouterr().err
    releaser.join(5)
    folders = [here]
    for name, driver in (("first", first), ("second", second)):
        assert driver.wait(120) == 0, (tmp_path / f"{name}.out").read_text()[-3000:]
        said = (tmp_path / f"{name}.out").read_text()
        folders.append(Path(said.splitlines()[-1]))
        assert (name == "second") == (WAITING in said), said[-2000:]
    assert folders[0] == folders[1] == folders[2] and [folders[0]] == [p.parent for p in
                                                                       (tmp_path / "runs").rglob("run.trec")]
    workers = {int(p) for p in log.with_suffix(".pids").read_text().split()} - {os.getpid(), first.pid, second.pid}
    assert len(workers) == 1  # (the drivers encode their queries themselves)
    while left := [pid for pid in workers if alive(pid)]:  # the first driver's workers, once it has ended
        assert time.monotonic() < deadline, f"workers of the first driver left: {named(left)}"
        time.sleep(0.1)
    assert not list((tmp_path / "cache" / "indexes").glob("*.shards"))
    index = index_bytes(tmp_path / "cache")  # one index folder
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "local"))
    clean = drive(str(tiny), str(dataset), str(tmp_path / "runs-local"), str(tmp_path / "local.log"), str(release),
                  executor="local")
    assert (here / "run.trec").read_bytes() == (clean / "run.trec").read_bytes()
    assert index == index_bytes(tmp_path / "local")
