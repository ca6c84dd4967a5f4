"""The kit's own local Ray cluster (no ``RAY_ADDRESS``, no ``ray.init`` of the caller: the kit
starts a cluster for the run and stops it after), in this test process (issue 48 item 11):

- the cluster page's example (docs/tasks/running-on-a-cluster.md: a BEIR folder,
  ``executor="ray"``), here through the API, with the tiny model and 1 worker (the page's 2 cost
  about 9 s more per run on a loaded 2-CPU machine, and are not what this case is about), run
  twice in one process, each time encoding the corpus on a cluster of its own: the second run
  works, both give the in-process run's bytes, and no process of either cluster is left (this
  process's children, counted);
- a cluster a ``ray start`` on this machine recorded (Ray's ``/tmp/ray/ray_current_cluster``) is
  not joined: the kit's local start is a new cluster (it failed three times with Ray's "num_cpus
  must not be provided" before).

The driver SIGKILLed while it runs its own local cluster: test_ray_executor.py.
"""

from __future__ import annotations

import json
import subprocess
import time

import psutil
import pytest
from ray_drivers import all_ended, beir_folder, children

import evalkit
from evalkit.data.runstore import SIDECAR
from evalkit.models.dense import BiEncoder
from evalkit.retrieval.embeddings import Encoder

ray = pytest.importorskip("ray")

from ray._private import services  # noqa: E402  (after the skip: ray is an optional extra)

from evalkit.retrieval.ray_executor import of_ray  # noqa: E402

pytestmark = pytest.mark.usefixtures("small_batches")  # tests/retrieval/conftest.py


def test_the_cluster_example_twice_in_one_process_gives_the_in_process_bytes_and_leaves_no_process(
        tiny, tmp_path, monkeypatch):
    if ray.is_initialized():  # a cluster of another module's tests: the kit would use it
        ray.shutdown()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_bootstrap_address", lambda *a, **k: "127.0.0.1:9")  # as after `ray start`
    dataset, before = beir_folder(tmp_path / "beir"), children()
    made = {}
    for each, executor in (("local", "local"), ("first", "ray"), ("second", "ray")):
        monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / each / "cache"))  # each encodes the corpus anew
        found = evalkit.evaluate(BiEncoder(Encoder(str(tiny))), f"beir:{dataset}", name="example", revision="1",
                                 runs_dir=tmp_path / each / "runs", executor=executor,
                                 workers=1 if executor == "ray" else None)
        folder = found.runs["base"]
        made[each] = (folder / "run.trec").read_bytes()
        execution = json.loads((folder / SIDECAR).read_text())["execution"]
        if executor == "ray":
            assert (execution["cluster"], execution["workers"], execution["vectors"]) == ("local", 1, "shared path")
            assert not ray.is_initialized()
            all_ended(before, within=10)  # the kit stopped its cluster: none of its processes is left
    assert made["first"] == made["local"] and made["second"] == made["local"]


def test_only_rays_own_processes_are_the_reapers():
    """What a local start hands its reaper (and what a failed start ends) are the new processes that
    are Ray's: a process another thread of the caller started in the meantime (a kernel's joblib
    pool; the suite's loky resource tracker was killed so) is left alone; a name that merely holds
    "ray" (array) is not Ray's."""
    started = [subprocess.Popen(["sh", "-c", "sleep 30", name]) for name in ("ray::IDLE", "array", "joblib")]
    try:
        deadline = time.monotonic() + 5
        while any(not psutil.Process(p.pid).cmdline() for p in started):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert of_ray({p.pid for p in started}) == {started[0].pid}
    finally:
        for process in started:
            process.kill()
            process.wait()
