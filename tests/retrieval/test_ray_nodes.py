"""Several Ray nodes (issue 47 item 1): a cluster of a head and three worker nodes on this machine,
started as Ray's own tests start theirs (`ray.cluster_utils.Cluster`: each node its own raylet,
object store and temporary folder, and here its own ``EVALKIT_CACHE``), this process its driver.

- A whole-corpus run of 2 workers, each on its own node, the vectors through Ray's object store
  (as when no worker sees the driver's cache folder): ``run.trec`` and the index byte-identical
  to the in-process run's, the sidecar naming the nodes and how the vectors travelled; nothing
  written under any node's cache folder (a build uses no embedding cache).
- The node of a worker killed in the middle of its batch, a spare node up: the run goes on (the
  worker "temporarily unavailable" is asked again until Ray restarts it on the spare) and its
  bytes are the in-process run's. The head declares a lost node dead after about 10 s
  (`FAST_DEATH`), long enough for Ray's own task retries to run out on "connection refused", as
  they did on a real pair of nodes (issue 47): without the kit's asking again, the run fails.
- The whole cluster stopped in the middle of a run: one line, through the API's own call, this
  process alive and no longer connected.
- No process of the cluster left once it is shut down (this process's children, counted).

What it does not prove: real networks (every node here is on one machine, one filesystem), real
GPUs, or nodes in other mount namespaces (the object-store path is forced by EVALKIT_RAY_VECTORS;
the probe that decides it is tested in test_ray_executor.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from ray_drivers import all_ended, children
from tiny_models import WORDS

from evalkit.core.errors import KitError
from evalkit.data.collection import Document, Query
from evalkit.models.dense import BiEncoder
from evalkit.retrieval import executors
from evalkit.retrieval.corpus import Corpus, rank_corpus
from evalkit.retrieval.embeddings import Encoder

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402  (after the skip: ray is an optional extra)

from evalkit.retrieval import ray_executor  # noqa: E402
from evalkit.retrieval.ray_executor import RayExecutor  # noqa: E402

FAST_DEATH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 10}  # a lost node dead in ~10 s


FAILED_START = """
import json, os, time
import ray._private.services as services
from evalkit.core.errors import KitError
from evalkit.retrieval import ray_executor

def never_registers(*args, **kwargs):  # what Ray raises when a loaded machine starts its node too slowly
    raise Exception("The current node timed out during startup (simulated)")

services.get_node = never_registers
ray_executor.START_ATTEMPTS = 2
start = time.monotonic()
try:
    ray_executor.RayExecutor(1)._connect()
except KitError as exc:
    said = str(exc)
print(json.dumps({"said": said, "seconds": time.monotonic() - start, "left": sorted(ray_executor.children())}))
"""


def test_a_local_cluster_that_does_not_start_is_one_line_and_leaves_no_process(tmp_path):
    """The kit's own local cluster (no RAY_ADDRESS) whose node never registers, in a process of its
    own: after its tries, one line naming the cause and saying to run in this process; none of
    the processes the tries started (GCS, raylet, agents) is left."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", FAILED_START], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["said"] == ("the local Ray cluster did not start in 2 tries (Exception: The current node timed out "
                             "during startup (simulated)); fix: run in this process (executor local), or again when "
                             "the machine is less loaded, or start Ray yourself (`ray start --head`) and set "
                             "RAY_ADDRESS")
    assert found["left"] == []


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    """(the cluster, its worker nodes, their cache folders); shut down at the end, every process
    of it gone (counted)."""
    if ray.is_initialized():
        ray.shutdown()
    before = children()
    root = tmp_path_factory.mktemp("nodes")
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20, "_system_config": FAST_DEATH})
    caches = [root / f"node{i}-cache" for i in range(3)]
    workers = [cluster.add_node(num_cpus=1, object_store_memory=80 << 20, env_vars={"EVALKIT_CACHE": str(c)})
               for c in caches]
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    yield cluster, workers, caches
    ray_executor.release_workers()
    ray.shutdown()
    cluster.shutdown()
    all_ended(before)


@pytest.fixture(autouse=True)
def object_store(small_batches, monkeypatch):
    """`small_batches` (tests/retrieval/conftest.py), the vectors through Ray's object store."""
    monkeypatch.setenv(ray_executor.VECTORS_ENV, "object-store")


def documents(n: int = 48) -> list[Document]:
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 14)))) for _ in range(n)]
    texts[30:34] = texts[2:6]  # repeated texts, three batches apart
    return [Document(f"d{i:03d}", "", t) for i, t in enumerate(texts)]


QUERIES = [Query(f"q{j}", " ".join(WORDS[j::5][:3])) for j in range(4)]


class Stalled:
    """A sentence-transformers model that, on a worker and in the batch holding `held`, writes its
    node's id to `marker` and waits there (until its node is killed)."""

    def __init__(self, model, held: str, marker: Path, driver: int):
        self.model, self.held, self.marker, self.driver = model, held, marker, driver

    def encode(self, texts, **kwargs):
        if self.held in texts and os.getpid() != self.driver and not self.marker.exists():
            self.marker.write_text(ray.get_runtime_context().get_node_id())
            time.sleep(600)
        return self.model.encode(texts, **kwargs)


class StalledEncoder(Encoder):
    def __init__(self, location: str, held: str, marker: Path):
        super().__init__(location)
        self.held, self.marker, self.driver = held, marker, os.getpid()

    @property
    def model(self):
        return Stalled(super().model, self.held, self.marker, self.driver)


ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get this module's classes by value


def ranked(encoder, cache: Path, executor, monkeypatch) -> tuple[dict, bytes]:
    monkeypatch.setenv("EVALKIT_CACHE", str(cache))
    with executor:
        found = rank_corpus(BiEncoder(encoder), QUERIES, Corpus.of_documents(documents()), 6, executor=executor)
    folder = next(p for p in (cache / "indexes").glob("dense-*") if p.is_dir() and "." not in p.name)
    return ({q: list(s.items()) for q, s in found.items()},
            b"".join((folder / name).read_bytes() for name in ("vectors.bin", "ids.txt", "meta.json")))


@pytest.fixture(scope="module")
def in_process(tiny, module_batches, tmp_path_factory) -> tuple[dict, bytes]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return ranked(Encoder(str(tiny)), tmp_path_factory.mktemp("local"), executors.IN_PROCESS, monkeypatch)


def test_a_run_on_two_nodes_is_byte_identical_to_the_in_process_run(nodes, tiny, in_process, tmp_path, monkeypatch):
    _, _, caches = nodes
    want = in_process
    executor = RayExecutor(2)
    got = ranked(Encoder(str(tiny)), tmp_path / "ray", executor, monkeypatch)
    assert got == want
    described = executor.describe()
    assert described["vectors"] == "object store" and len(described["nodes"]) == 2  # one worker on each of 2 nodes
    assert any("Ray object store" in note for note in described["notes"])
    assert not any(c.exists() and any(c.rglob("*")) for c in caches)  # no node wrote a cache


def test_a_worker_node_killed_mid_batch_with_a_spare_up_still_gives_the_in_process_bytes(nodes, tiny, in_process,
                                                                                       tmp_path, monkeypatch):
    cluster, workers, _ = nodes  # the workers of the run before, kept idle: on 2 of the 3 worker nodes
    held, marker = documents()[20].text, tmp_path / "stalled"
    want = in_process
    killed: list = []

    def kill_its_node():
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        node = next(n for n in workers if marker.exists() and n.node_id == marker.read_text())
        cluster.remove_node(node, allow_graceful=False)
        killed.append(node)

    killer = threading.Thread(target=kill_its_node, daemon=True)
    killer.start()
    got = ranked(StalledEncoder(str(tiny), held, marker), tmp_path / "ray", RayExecutor(2), monkeypatch)
    killer.join(5)
    assert killed and got == want


def test_the_cluster_stopped_mid_run_is_one_line_and_this_process_lives_on(nodes, tiny, tmp_path, monkeypatch):
    cluster, workers, _ = nodes
    marker = tmp_path / "stalled"

    def stop_the_cluster():
        deadline = time.monotonic() + 240
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for node in [*workers, cluster.head_node]:
            if node in cluster.worker_nodes or node is cluster.head_node:
                node.kill_all_processes(check_alive=False, allow_graceful=False)

    stopper = threading.Thread(target=stop_the_cluster, daemon=True)
    stopper.start()
    with pytest.raises(KitError) as caught:
        ranked(StalledEncoder(str(tiny), documents()[20].text, marker), tmp_path / "ray", RayExecutor(2), monkeypatch)
    stopper.join(5)
    assert str(caught.value).startswith(f"the Ray cluster (this process's) stopped in the middle of the run: its "
                                        f"head at {cluster.address} does not answer; fix: start it again")
    assert "\n" not in str(caught.value) and not ray.is_initialized()
