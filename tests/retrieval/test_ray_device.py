"""Where a Ray worker encodes (issue 47 item 1): the device is chosen on the worker, not on the
driver, and a run encoded on the workers' GPUs is another run than the CPU one.

The GPU is faked: a cluster (`ray.cluster_utils.Cluster`) whose worker node declares one GPU to
Ray (``num_gpus=1``) and whose worker processes, through the job's runtime_env
(``worker_process_setup_hook``, run in each worker before its first task), see torch say a GPU
is there (``torch.cuda.is_available``, while a file the test holds exists) and load a
sentence-transformers model only when asked for ``cuda`` (which they then run on the CPU, the
only device here). The driver (this process) sees no GPU. So:

- the model built here (device ``cpu``) loads on the worker's ``cuda`` (else the fake refuses it);
- the sidecar and the executor say ``cuda``; the index and the run's key carry the device, so a
  Ray run of GPU workers is never answered from the in-process CPU run's store (nor the reverse);
- the same node, its file removed so that torch there sees no GPU though Ray gives it one: one
  line naming it.

A node that joins without the kit (item 2) is simulated in the same way: while another file
exists, the setup hook puts an import finder first that finds no ``evalkit`` (Ray puts the
driver's own paths in front of a worker's, so on one machine no PYTHONPATH can hide the kit);
Ray then fails to create the kit's worker class there, as on a node where it is not installed.

A node in a mount namespace of its own (item 3): `ray start` under ``unshare --mount``, a tmpfs
over the driver's cache folder there; skipped, saying why, where unshare is not permitted.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ray_drivers import all_ended, children
from tiny_models import WORDS, build_sentence_transformer

import evalkit
from evalkit.core.errors import MissingPrerequisite
from evalkit.data.collection import Collection, Document, Query
from evalkit.data.runstore import SIDECAR
from evalkit.encoders.gritlm import GritLMEncoder
from evalkit.encoders.promptriever import PromptrieverEncoder
from evalkit.models import paper
from evalkit.models.dense import BiEncoder
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain
from evalkit.retrieval import embeddings, executors, vector_index
from evalkit.retrieval.corpus import Corpus, rank_corpus
from evalkit.retrieval.embeddings import Encoder

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402  (after the skip: ray is an optional extra)

from evalkit.retrieval import ray_executor  # noqa: E402
from evalkit.retrieval.ray_executor import RayExecutor  # noqa: E402

# Set on the fake node, each to a file's path: while the file exists, torch there sees a GPU
# (`FAKE`), or Python there cannot import the kit (`NO_KIT`); a test switches them by the file.
FAKE, NO_KIT = "EVALKIT_TEST_FAKE_GPU", "EVALKIT_TEST_NO_KIT"


class NoKit:
    """An import finder that finds no ``evalkit`` while `marker` exists, as on a node where the
    kit is not installed."""

    def __init__(self, marker: str):
        self.marker = marker

    def find_spec(self, name, path=None, target=None):
        if (name == "evalkit" or name.startswith("evalkit.")) and os.path.exists(self.marker):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def fake_node() -> None:
    """In each worker of the job, before its first task: on a node that sets `NO_KIT`, Python
    cannot import the kit while its file exists; on one that sets `FAKE`, torch sees a GPU while
    its file exists, and a model is loaded only on ``cuda`` (run on the CPU: the tiny model's
    numbers are what they are)."""
    if os.environ.get(NO_KIT):
        sys.meta_path.insert(0, NoKit(os.environ[NO_KIT]))
        if os.path.exists(os.environ[NO_KIT]):
            return  # (a worker that cannot start the kit's class needs no torch)
    if not os.environ.get(FAKE):
        return
    import torch
    from sentence_transformers import SentenceTransformer

    marker = os.environ[FAKE]
    torch.cuda.is_available = lambda: os.path.exists(marker)
    torch.cuda.get_device_name = lambda device=None: "Fake GPU (test)"
    load = SentenceTransformer.__init__

    def on_the_gpu(self, *args, device=None, **kwargs):
        if device != "cuda":
            raise RuntimeError(f"this node has a GPU but the model was to load on {device}")
        load(self, *args, device="cpu", **kwargs)

    SentenceTransformer.__init__ = on_the_gpu


ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers get this module's functions by value


@pytest.fixture(scope="module")
def gpu_node(tmp_path_factory):
    """(the cluster, its one worker node: 1 CPU, 1 GPU for Ray, the files that say whether torch
    sees it and whether the kit imports there); every process gone at the end."""
    if ray.is_initialized():
        ray.shutdown()
    before = children()
    markers = tmp_path_factory.mktemp("markers")
    sees, no_kit = markers / "torch-sees-a-gpu", markers / "no-kit"
    sees.touch()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20})
    node = cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=80 << 20,
                            env_vars={FAKE: str(sees), NO_KIT: str(no_kit)})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False,
             runtime_env={"worker_process_setup_hook": fake_node})
    yield cluster, node, sees, no_kit
    ray_executor.release_workers()
    ray.shutdown()
    cluster.shutdown()
    all_ended(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(autouse=True)
def small_batches(monkeypatch, tmp_path):
    monkeypatch.setattr(vector_index, "BATCH", 8)
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(ray_executor.VECTORS_ENV, "object-store")
    vector_index._VERIFIED.clear()


def collection() -> Collection:
    rng = np.random.default_rng(3)
    docs = {f"d{i:02d}": Document(f"d{i:02d}", "", " ".join(rng.choice(WORDS, size=6))) for i in range(24)}
    queries = {f"q{j}": Query(f"q{j}", " ".join(WORDS[j::7][:3])) for j in range(3)}
    return Collection(name="device-corpus", documents=docs, queries=queries, qrels={q: {"d00": 1} for q in queries},
                      checksum="device-corpus-1")


class Reference:
    """A paper encoder's shape: a device, an encode function."""

    device = "cpu"

    def encode_documents(self, texts):
        return np.zeros((len(texts), 2), np.float32)


def test_a_copy_of_a_model_with_no_device_named_takes_the_device_of_the_process_it_lands_in(tiny, monkeypatch):
    """Pickled here (device cpu) and unpickled where torch sees a GPU: cuda; a named device stays."""
    auto, named = Encoder(str(tiny)), Encoder(str(tiny), devices=["cpu"])
    monkeypatch.setattr(embeddings, "resolve_device", lambda device=None: device or "cuda")
    assert pickle.loads(pickle.dumps(auto)).device == "cuda" and pickle.loads(pickle.dumps(named)).device == "cpu"
    assert auto.device == "cpu"  # the sender's own is untouched

    monkeypatch.setattr(paper, "resolve_device", lambda device=None: device or "cuda")
    for named_device, want in ((None, "cuda"), ("cpu", "cpu")):
        scorer = paper.on_workers_device(paper.PaperBiEncoder(Reference(), {"device_kind": "cpu"}, "{text}"),
                                         named_device)
        assert pickle.loads(pickle.dumps(scorer)).reference.device == want


def test_a_7b_encoders_copy_takes_the_dtype_of_the_device_it_lands_in(monkeypatch):
    """GritLM-7B and Promptriever built on a CPU driver (float32) and unpickled on a GPU worker: the
    dtype a GPU takes when the entry names none (GritLM: the checkpoint's own, ``auto``; Promptriever:
    bfloat16), not the CPU's float32 in 28 GB; a dtype the entry names stays (issue 47)."""
    monkeypatch.setattr(paper, "resolve_device", lambda device=None: device or "cuda")
    for encoder_class, gpu in ((GritLMEncoder, "auto"), (PromptrieverEncoder, "bfloat16")):
        for named, want in ((None, gpu), ("float16", "float16")):
            encoder = encoder_class("some/model", device="cpu", dtype=named)
            assert encoder.dtype == (named or "float32")
            scorer = paper.on_workers_device(paper.PaperBiEncoder(encoder, {"device_kind": "cpu"}, "{text}"), None)
            copy = pickle.loads(pickle.dumps(scorer)).reference
            assert (copy.device, copy.dtype) == ("cuda", want)
            assert (encoder.device, encoder.dtype) == ("cpu", named or "float32")  # the sender's own is untouched


def test_a_cpu_driver_with_gpu_workers_encodes_on_the_gpus_and_never_reuses_the_cpu_run(gpu_node, tiny, tmp_path,
                                                                                        monkeypatch):
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"profiles": {"test": {"first_stage": "tiny", "depth": 3, "models": {
        "tiny": {"family": "dense", "model": str(tiny)}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(models))
    runs = tmp_path / "runs"

    def run(executor: str) -> dict:
        settings = RunSettings(model="tiny", dataset="device-corpus", profile="test", executor=executor,
                               workers=1 if executor == "ray" else None)
        folder = obtain(bind(settings, collection(), runs), Reuse.IF_VERIFIED).folder
        return json.loads((folder / SIDECAR).read_text())

    cpu = run("local")
    assert "device" not in cpu and cpu["execution"] == {"executor": "local"}  # the CPU key as it was
    gpu = run("ray")  # same settings, same store: not answered by the CPU run
    assert gpu["device"] == "cuda" and gpu["execution"]["device"] == "cuda"
    assert gpu["execution"]["nodes"][0].endswith(": Fake GPU (test)")
    assert {k: v for k, v in gpu.items() if k not in ("device", "execution")} == \
        {k: v for k, v in cpu.items() if k != "execution"}
    again = run("local")  # and the CPU run is not answered by the GPU one
    assert "device" not in again and again["execution"] == {"executor": "local"}
    indexes = sorted(p.name for p in (tmp_path / "cache" / "indexes").glob("dense-*") if p.is_dir())
    assert len(indexes) == 2  # the workers' GPU index beside the CPU one


JOINED_TWICE = """
import sys
from evalkit.retrieval.ray_executor import RayExecutor

first = RayExecutor(1)
print(first.encoding_device())  # a run asks the device before the store (`runner.on_device`): it joins
second = RayExecutor(1)  # the run's own executor, in the same process
second._connect()
print(second.cluster)
"""


def test_a_run_whose_key_asked_the_clusters_device_still_says_how_it_joined(gpu_node, tmp_path):
    """Through RAY_ADDRESS: the device asked for the key joins the cluster first; the run's own
    executor, joining after it in the same process, still says how (the sidecar's words)."""
    cluster = gpu_node[0]
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    done = subprocess.run([sys.executable, "-c", JOINED_TWICE], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["cuda", f"joined at {cluster.address}"]


def test_a_node_given_a_gpu_whose_torch_sees_none_is_one_line_naming_it(gpu_node, tiny):
    _, node, sees, _ = gpu_node  # (the idle worker of the run before is asked again)
    sees.unlink()  # torch on the node that Ray gives a GPU sees none
    executor = RayExecutor(1)
    try:
        with pytest.raises(MissingPrerequisite) as caught, executor:
            executor._workers(Encoder(str(tiny)).compute)
    finally:
        sees.touch()
    said = str(caught.value)
    assert said.startswith("Ray worker 1 of 1 on ") and f"(node {node.node_id[:8]})" in said
    assert said.endswith("was given one GPU by the cluster but its torch encodes on cpu; fix: install a CUDA build "
                         "of torch on that node, or leave its GPUs out of Ray there (`ray start --num-gpus 0`)")
    assert "\n" not in said and executor.actors == []
    assert executors.device_part(executor) == {"device": "cuda"}  # what the cluster said it gives


def test_a_node_that_joins_without_the_kit_is_one_line_naming_it(gpu_node, tiny):
    _, bare, _, no_kit = gpu_node
    ray_executor.release_workers()
    no_kit.touch()  # the node's Python finds no evalkit
    executor = RayExecutor(1)
    try:
        with pytest.raises(MissingPrerequisite) as caught, executor:
            executor._workers(Encoder(str(tiny)).compute)
    finally:
        no_kit.unlink()
    said = str(caught.value)
    assert said == (f"Ray worker 1 of 1 cannot start on node {bare.node_id[:8]} ({bare.node_ip_address}): its Python "
                    "cannot import evalkit (No module named 'evalkit'), so the node joined the cluster without the "
                    f"kit; fix: install the kit there, the driver's version (pip install 'evalkit[cluster]=="
                    f"{evalkit.__version__}' in the Python its `ray start` runs), or send it with the job: "
                    "ray.init(address=..., runtime_env={'py_modules': [evalkit]}) before the run")
    assert executor.actors == []


UNSHARE = shutil.which("unshare")


def own_mount_namespace(folder: Path) -> str | None:
    """Why a node cannot be started here in a mount namespace of its own with a tmpfs over
    `folder` (None: it can)."""
    if UNSHARE is None:
        return "no unshare command"
    done = subprocess.run([UNSHARE, "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs "$0"',
                           str(folder)], capture_output=True, text=True)
    return None if done.returncode == 0 else f"unshare --mount with a tmpfs is not permitted here " \
        f"({' '.join(done.stderr.split())})"


def test_a_node_in_its_own_mount_namespace_gets_the_vectors_through_the_object_store(gpu_node, tiny, tmp_path_factory,
                                                                                    monkeypatch):
    """A worker node started by `ray start` in a mount namespace of its own, a tmpfs over the
    driver's cache folder there (as on another machine): the probe finds that no worker sees the
    folder, the vectors come back through Ray's object store (nothing forces it), and the run's
    bytes are the in-process run's."""
    driver = tmp_path_factory.mktemp("driver")  # the driver's cache folder: hidden from the node
    why = own_mount_namespace(driver)
    if why is not None:
        pytest.skip(f"{why}: the nodes in other mount namespaces are not simulated (needs root or CAP_SYS_ADMIN)")
    cluster = gpu_node[0]
    ray_executor.release_workers()
    for node in list(cluster.worker_nodes):
        cluster.remove_node(node)
    monkeypatch.setenv("EVALKIT_CACHE", str(driver / "cache"))
    monkeypatch.delenv(ray_executor.VECTORS_ENV)
    corpus, queries = Corpus.of_documents(list(collection().documents.values())), list(collection().queries.values())
    with executors.IN_PROCESS as executor:
        want = rank_corpus(BiEncoder(Encoder(str(tiny))), queries, corpus, 5, executor=executor)
    for index in (driver / "cache" / "indexes").iterdir():  # the Ray run encodes the corpus anew
        shutil.rmtree(index) if index.is_dir() else index.unlink()
    ray_cli = Path(sys.executable).with_name("ray")
    script = ('mount -t tmpfs tmpfs "$0" && exec "$1" start --address="$2" --num-cpus=1 '
              '--object-store-memory=83886080 --block')
    alive = len([n for n in ray.nodes() if n["Alive"]])
    node = subprocess.Popen([UNSHARE, "--mount", "--propagation", "private", "sh", "-c", script, str(driver),
                             str(ray_cli), cluster.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while len([n for n in ray.nodes() if n["Alive"]]) <= alive:
            assert node.poll() is None and time.monotonic() < deadline, "the node in its own namespace did not join"
            time.sleep(0.5)
        executor = RayExecutor(1)
        with executor:
            got = rank_corpus(BiEncoder(Encoder(str(tiny))), queries, corpus, 5, executor=executor)
        assert got == want
        said = executor.describe()
        assert said["vectors"] == "object store"
        assert "document vectors came back through the Ray object store (no path every worker sees)" in said["notes"]
    finally:
        ray_executor.release_workers()
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(60)
