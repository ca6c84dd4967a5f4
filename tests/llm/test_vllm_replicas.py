"""Several vLLM replicas of one model (`evalkit.llm.replicas`), tested with stand-in servers
(tests/fake_vllm.py): the judgments, their cache rows and the scores are one server's whichever
replica answered; a replica that dies mid-job hands its prompts to the others; a replica that
cannot start is one line naming it; GPUs are split between local replicas; a model too large for
a node gets vLLM's Ray flags (and the cluster's address). The Ray placement is the last test (it
starts a local Ray cluster of 2 CPUs, about 20 s here)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evalkit.core.errors import KitError
from evalkit.llm.replicas import ServeCommand, local_replicas, ray_replicas
from evalkit.llm.reranker import LLMReranker

ROOT = Path(__file__).resolve().parents[2]
QUERIES = 6


def jobs() -> list:
    """Six queries of six candidates each: enough prompts (heapsort, top 2) to spread over replicas."""
    out = []
    for q in range(QUERIES):
        docs = [(f"q{q}d{i}", f"Candidate paper {i} of query {q} about topic {(i * q) % 4}.") for i in range(6)]
        out.append((f"Find papers like seed {q}.", f"Seed paper {q}.", docs,
                    {doc: float(6 - i) for i, (doc, _) in enumerate(docs)}))
    return out


def settings(tmp_path, cache: str, **extra) -> dict:
    return {"backend": "openai", "serve": "vllm", "model": "fake/llm-7b", "method": "prp", "variant": "heapsort",
            "k": 2, "depth": 6, "tensor_parallel_size": 1, "max_retries": 2, "backoff_s": 0.05, "max_in_flight": 2,
            "cache": str(tmp_path / cache), **extra}


def rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT * FROM judgments").fetchall())


@pytest.fixture(autouse=True)
def no_gpu(vllm, monkeypatch):
    """The stand-in needs no GPU: replicas get no CUDA_VISIBLE_DEVICES of their own."""
    monkeypatch.setattr("evalkit.llm.vllm_server.visible_gpus", lambda: 0)


@pytest.fixture
def one_server(vllm):
    """The scores and cache rows of one server (the reference every replica set must give)."""
    scores = LLMReranker(settings(vllm, "one.sqlite")).rerank_many(jobs())
    return scores, rows(vllm / "one.sqlite")


def answered(model: LLMReranker) -> list[int]:
    """Prompts each replica answered."""
    backend = model.judge.backend
    built = list(backend._backends.items())
    return [sum(b.usage.prompts for (i, _), b in built if i == index)
            for index in range(len(backend.replicas))]


def test_three_replicas_give_one_servers_judgments_rows_and_scores(vllm, one_server):
    model = LLMReranker(settings(vllm, "three.sqlite"))
    model.use_workers(3)
    scores = model.rerank_many(jobs())
    assert (scores, rows(vllm / "three.sqlite")) == one_server
    spread = answered(model)
    assert all(count > 0 for count in spread) and sum(spread) == len(one_server[1])  # each prompt asked once
    assert all(server.process is None for server in model.server.servers)  # every replica stopped
    serving = model.describe()["serving"]
    assert serving["replicas"] == 3 and serving["placement"] == "local"
    assert model.judge.backend.numerics == LLMReranker(settings(vllm, "x.sqlite")).judge.backend.numerics


def test_a_replica_that_dies_mid_job_hands_its_prompts_to_the_others(vllm, one_server):
    model = LLMReranker(settings(vllm, "died.sqlite"))
    replicas = local_replicas(model.command, 3)
    replicas.servers[1].env["FAKE_VLLM_MODE"] = "die-after:3"
    model.replicate(replicas)
    scores = model.rerank_many(jobs())
    assert (scores, rows(vllm / "died.sqlite")) == one_server
    spread = answered(model)
    # it served 3; the third answer may die with it, in flight beside the fourth request
    assert spread[1] in (2, 3) and sum(spread) == len(one_server[1])
    assert model.judge.backend._dead == {1}


def test_when_every_replica_is_gone_the_run_stops_with_one_line(vllm, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "die-after:2")
    model = LLMReranker(settings(vllm, "gone.sqlite"))
    model.use_workers(2)
    with pytest.raises(KitError) as caught:
        model.rerank_many(jobs())
    message = str(caught.value)
    assert message.startswith("all 2 replicas of fake/llm-7b are gone; the last: replica ")
    assert "exited mid-run" in message and "\n" not in message
    assert len(rows(vllm / "gone.sqlite")) <= 4  # two answers each at most, kept in the cache


def test_a_replica_that_cannot_start_is_one_line_naming_it(vllm):
    model = LLMReranker(settings(vllm, "start.sqlite"))
    replicas = local_replicas(model.command, 3)
    replicas.servers[2].env["FAKE_VLLM_MODE"] = "exit"
    model.replicate(replicas)
    with pytest.raises(KitError, match=r"^replica 3 of 3 of fake/llm-7b: did not start: vllm serve fake/llm-7b exited "
                                       r"with status 3 before it answered \(fake vllm: CUDA out of memory\)"):
        model.rerank_many(jobs())
    assert all(server.process is None for server in replicas.servers)  # the others stopped too


def test_local_replicas_split_the_visible_gpus(monkeypatch):
    monkeypatch.setattr("evalkit.llm.vllm_server.visible_gpus", lambda: 4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    split = local_replicas(ServeCommand("m"), 2)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in split.servers] == ["0,1", "2,3"]
    assert [s.tensor_parallel_size for s in split.servers] == [2, 2]
    assert len({s.port for s in split.servers}) == 2 and len({s.log_path for s in split.servers}) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in local_replicas(ServeCommand("m", tensor_parallel_size=1), 4)
            .servers] == ["3", "5", "6", "7"]
    with pytest.raises(KitError, match="2 replicas of m at 3 GPU.s. each need 6 GPUs; 4 are visible"):
        local_replicas(ServeCommand("m", tensor_parallel_size=3), 2)
    one = local_replicas(ServeCommand("m"), 1).servers[0]
    assert one.env == {} and one.tensor_parallel_size == 4  # one replica: as one server
    with pytest.raises(KitError, match="workers=0: must be a positive whole number"):
        local_replicas(ServeCommand("m"), 0)


def test_the_key_is_one_servers_wherever_a_replica_listens():
    here = ServeCommand("m", tensor_parallel_size=2).server()
    there = ServeCommand("m", tensor_parallel_size=2).server(host="0.0.0.0", env={"CUDA_VISIBLE_DEVICES": "1"},
                                                            label="r1")
    assert here.identity == there.identity and here.base_url != there.base_url
    assert ServeCommand("m", tensor_parallel_size=1).server().identity != here.identity


def test_a_model_too_large_for_a_node_gets_vllms_ray_flags(vllm, monkeypatch):
    """``distributed_executor_backend: ray`` with tensor and pipeline parallel sizes: the argv built
    and run by the stand-in, which needs the cluster's RAY_ADDRESS."""
    big = settings(vllm, "big.sqlite", tensor_parallel_size=8, pipeline_parallel_size=2,
                   distributed_executor_backend="ray")
    model = LLMReranker(big)
    argv = model.server.argv()
    assert argv[:9] == ["vllm", "serve", "fake/llm-7b", "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                        "--distributed-executor-backend", "ray"]
    assert model.server.gpus == 16
    assert model.server.identity != LLMReranker(settings(vllm, "small.sqlite")).server.identity  # another key
    with pytest.raises(KitError, match=r"exited with status 3 .*no Ray cluster \(RAY_ADDRESS\)"):
        model.rerank_many(jobs()[:1])
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    scores = LLMReranker(big).rerank_many(jobs()[:1])
    assert sorted(scores[0]) == sorted(jobs()[0][3])
    assert json.loads((vllm / "argv.json").read_text())[2:8] == argv[3:9]  # its argv lacks the executable
    with pytest.raises(KitError, match="distributed_executor_backend 'slurm' is not one of"):
        LLMReranker(settings(vllm, "x.sqlite", distributed_executor_backend="slurm"))
    with pytest.raises(KitError, match="pipeline_parallel_size=0 must be positive"):
        LLMReranker(settings(vllm, "x.sqlite", pipeline_parallel_size=0))


def test_use_workers_leaves_entries_without_a_kit_started_server_alone(vllm):
    api = {**settings(vllm, "api.sqlite"), "base_url": "http://127.0.0.1:9/v1"}
    del api["serve"], api["tensor_parallel_size"]
    model = LLMReranker(api)
    backend = model.judge.backend
    model.use_workers(3, "ray")
    assert model.judge.backend is backend and "serving" not in model.describe()
    with pytest.raises(KitError, match="placement='slurm': is not one of"):
        LLMReranker(settings(vllm, "p.sqlite")).use_workers(2, "slurm")
    with pytest.raises(KitError, match="replicas: they run another command"):
        LLMReranker(settings(vllm, "c.sqlite")).replicate(local_replicas(ServeCommand("other/model"), 2))


def test_replicas_on_a_local_ray_cluster(vllm, monkeypatch):
    """Two Ray actors, each running a stand-in server on its node's address: one server's judgments
    and scores, also when one actor is killed mid-job (its node lost); then a model vLLM spreads
    over the cluster gets the cluster's address. The actors get what the stand-in needs through
    their environment, so a cluster started elsewhere (another test's) serves as well."""
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("VLLM_TEST_SETTING", "kept")  # a VLLM_* variable: in the key, handed to the actors
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        reference = LLMReranker(settings(vllm, "ray-one.sqlite"))
        expected = reference.rerank_many(jobs()), rows(vllm / "ray-one.sqlite")
        model = LLMReranker(settings(vllm, "ray.sqlite"))
        replicas = ray_replicas(model.command, 2)
        for server in replicas.servers:
            assert server.environment == {"VLLM_TEST_SETTING": "kept"}
            server.environment.update(PATH=os.environ["PATH"], EVALKIT_CACHE=os.environ["EVALKIT_CACHE"],
                                      FAKE_VLLM_ANSWER_S="0.1", PYTHONPATH=os.pathsep.join(
                                          filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        model.replicate(replicas)
        killed = []

        def kill_replica_two():  # once replica 2 has answered 3 prompts, its actor goes
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not killed:
                if answered(model)[1] >= 3:
                    killed.append(model.server.servers[1].node)
                    ray.kill(model.server.servers[1].actor)
                time.sleep(0.005)

        watcher = threading.Thread(target=kill_replica_two, daemon=True)
        watcher.start()
        scores = model.rerank_many(jobs())
        watcher.join()
        assert (scores, rows(vllm / "ray.sqlite")) == expected
        assert killed and model.judge.backend._dead == {1}
        serving = model.describe()["serving"]
        assert serving["placement"] == "ray" and serving["replicas"] == 2 and all(serving["nodes"])
        with pytest.raises(KitError, match="3 replicas of fake/llm-7b need 3 CPUs .*the Ray cluster has 2"):
            ray_replicas(model.command, 3).ensure_started()
        big = LLMReranker(settings(vllm, "ray-big.sqlite", pipeline_parallel_size=2,
                                   distributed_executor_backend="ray"))
        big.use_workers(1, "ray")
        big.rerank_many(jobs()[:1])
        log = big.server.servers[0].log_path.read_text()
        assert f"Ray cluster at {ray.get_runtime_context().gcs_address}" in log
    finally:
        if started:
            ray.shutdown()
