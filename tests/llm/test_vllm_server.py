"""`serve: vllm`: the kit starts `vllm serve` (a stand-in executable on PATH speaking the same API
on loopback, tests/fake_vllm.py), waits for /v1/models, reranks, and stops it on success, failure
and interrupt; a server that never becomes ready, exits at once or dies mid-run is one line, and
the judgments made before a death stay cached."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from evalkit.core.errors import KitError
from evalkit.llm import reranker as reranker_module
from evalkit.llm.reranker import LLMReranker

DOCS = [(f"doc{i}", f"Candidate paper {i} about topic {i % 3}.") for i in range(5)]
FIRST = {doc: float(5 - i) for i, (doc, _) in enumerate(DOCS)}


def settings(tmp_path, **extra) -> dict:
    return {"backend": "openai", "serve": "vllm", "model": "fake/llm-7b", "method": "prp", "variant": "sliding",
            "k": 1, "depth": 5, "max_retries": 1, "backoff_s": 0.01, "cache": str(tmp_path / "judgments.sqlite"),
            **extra}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def cached(tmp_path) -> int:
    with sqlite3.connect(tmp_path / "judgments.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]


def test_started_with_vllms_flags_reranks_and_is_stopped(vllm):
    model = LLMReranker(settings(vllm))
    port = model.server.port
    scores = model.rerank("Find papers with a similar method.", "A seed paper.", DOCS, FIRST)
    assert sorted(scores) == sorted(FIRST)
    argv = json.loads((vllm / "argv.json").read_text())
    assert argv == ["serve", "fake/llm-7b", "--tensor-parallel-size", "2", "--enable-prefix-caching",
                    "--host", "127.0.0.1", "--port", str(port)]
    assert not alive(int((vllm / "pid").read_text()))  # stopped on success
    assert cached(vllm) == 2 * 4  # sliding, one pass over 5: 4 comparisons, both orders
    (vllm / "argv.json").unlink()
    again = LLMReranker(settings(vllm)).rerank("Find papers with a similar method.", "A seed paper.", DOCS, FIRST)
    assert again == scores and not (vllm / "argv.json").exists()  # every judgment cached: no server started


@pytest.mark.parametrize("change", ["rebuilt", "other-install", "other-executable", "vllm-environment"])
def test_judgments_of_one_vllm_build_are_not_served_for_another(vllm, change, monkeypatch):
    """The judgment key holds the executable's identity (real path, size, mtime, the sha256 of
    vllm's installed RECORD beside it) and the VLLM_* environment: another build asks every
    judgment again."""
    record = vllm / "lib" / "python3.11" / "site-packages" / "vllm-0.0.1.dist-info" / "RECORD"
    record.parent.mkdir(parents=True)
    record.write_text("vllm/__init__.py,sha256=one,10\n")
    first = LLMReranker(settings(vllm))
    scores = first.rerank("Find.", "Seed.", DOCS, FIRST)
    assert cached(vllm) == 8
    extra = {}
    if change == "rebuilt":  # reinstalled in place: the launcher rewritten
        exe = vllm / "bin" / "vllm"
        exe.write_text(exe.read_text() + "# rebuilt\n")
    elif change == "other-install":  # the same launcher over another vllm build
        record.write_text("vllm/__init__.py,sha256=two,10\n")
    elif change == "vllm-environment":
        monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASHINFER")
    else:  # a copy of the launcher elsewhere, named by vllm_executable
        other = vllm / "other" / "vllm"
        other.parent.mkdir()
        other.write_bytes((vllm / "bin" / "vllm").read_bytes())
        other.chmod(0o755)
        extra = {"vllm_executable": str(other)}
    (vllm / "argv.json").unlink()
    again = LLMReranker(settings(vllm, **extra))
    assert again.rerank("Find.", "Seed.", DOCS, FIRST) == scores
    assert again.judge.backend.usage.prompts == 8 and (vllm / "argv.json").exists()  # a server asked again
    assert cached(vllm) == 16


def test_the_executable_identity_names_an_executable_not_found(vllm):
    from evalkit.llm.vllm_server import executable_identity

    assert executable_identity("no-such-vllm-here") == {"name": "no-such-vllm-here", "found": False}
    found = executable_identity("vllm")
    assert found["path"] == str((vllm / "bin" / "vllm").resolve()) and found["installed"] == {}


def test_the_model_name_is_one_argument_never_a_shell_command(vllm):
    name = "fake/x; touch pwned"
    LLMReranker(settings(vllm, model=name)).rerank("Find.", "Seed.", DOCS[:2], {"doc0": 2.0, "doc1": 1.0})
    assert json.loads((vllm / "argv.json").read_text())[1] == name
    assert not Path("pwned").exists() and not (vllm / "pwned").exists()


def test_a_server_that_never_answers_is_stopped_after_the_timeout(vllm, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "never-ready")
    model = LLMReranker(settings(vllm, ready_timeout_s=1.5))
    with pytest.raises(KitError, match=r"did not answer .*/v1/models within ready_timeout_s=1.5 s; stopped it"):
        model.rerank("Find.", "Seed.", DOCS, FIRST)
    assert not alive(int((vllm / "pid").read_text()))


def test_a_server_that_exits_at_once_names_its_last_line(vllm, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "exit")
    with pytest.raises(KitError, match=r"exited with status 3 before it answered \(fake vllm: CUDA out of memory\)"):
        LLMReranker(settings(vllm)).rerank("Find.", "Seed.", DOCS, FIRST)


def test_a_server_that_dies_mid_run_keeps_the_judgments_so_far(vllm, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "die-after:3")
    with pytest.raises(KitError) as caught:
        LLMReranker(settings(vllm, max_retries=5, backoff_s=0.5)).rerank("Find.", "Seed.", DOCS, FIRST)
    message = str(caught.value)
    assert "exited mid-run (status 1" in message and "judgments so far are cached" in message
    assert "\n" not in message
    kept = cached(vllm)  # the server answered 3 prompts; the last may have been in flight beside the failed one
    assert kept in (2, 3)
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    model = LLMReranker(settings(vllm))
    model.rerank("Find.", "Seed.", DOCS, FIRST)
    assert model.judge.backend.usage.prompts == 8 - kept  # the rest only
    assert cached(vllm) == 8


def test_an_interrupt_stops_the_server(vllm, monkeypatch):
    model = LLMReranker(settings(vllm))

    def interrupted(judge, *args, **kwargs):
        judge.backend.server.ensure_started()
        raise KeyboardInterrupt

    monkeypatch.setattr(reranker_module, "run_tasks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.rerank("Find.", "Seed.", DOCS, FIRST)
    assert not alive(int((vllm / "pid").read_text()))


def test_serve_settings_are_checked(vllm):
    with pytest.raises(KitError, match="base_url .* is not used; drop one of them"):
        LLMReranker(settings(vllm, base_url="http://localhost:8000/v1"))
    with pytest.raises(KitError, match="the kit starts vllm servers for backend openai"):
        LLMReranker(settings(vllm, serve="tgi"))
    with pytest.raises(KitError, match="apply to a server the kit starts; add serve: vllm"):
        LLMReranker({**settings(vllm), "serve": None, "base_url": "http://x/v1", "tensor_parallel_size": 2})


PARENT = """
import signal, sys, time
for sig in (signal.SIGTERM, signal.SIGHUP):  # as a kit run from a terminal has them, even under nohup
    signal.signal(sig, signal.SIG_DFL)
from evalkit.llm.vllm_server import VLLMServer
server = VLLMServer("fake/llm-7b", tensor_parallel_size=1, ready_timeout_s=60)
server.ensure_started()
print(server.process.pid, flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return alive(pid)
    return state != "Z"


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM", "SIGHUP"])
def test_no_descendant_of_a_kit_started_server_outlives_the_kit(vllm, monkeypatch, sig):
    """The kit's process killed outright (no cleanup of its own runs): neither the process it
    started, nor the server, nor the server's own worker (a grandchild of the kit) may outlive it."""
    import signal
    import subprocess
    import time

    monkeypatch.setenv("FAKE_VLLM_CHILD_PIDFILE", str(vllm / "worker.pid"))
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    pids: list[int] = []
    try:
        pids.append(int(parent.stdout.readline()))
        pids += [int((vllm / name).read_text()) for name in ("pid", "worker.pid")]
        assert len(set(pids)) >= 2 and all(running(pid) for pid in pids)
        parent.send_signal(getattr(signal, sig))
        try:
            parent.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the parent did not end within 60 s of {sig}")
        deadline = time.monotonic() + 10
        while any(running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [pid for pid in pids if running(pid)]
        assert not survivors, f"{survivors} of {pids} outlived their parent killed by {sig}"
    finally:
        parent.kill()
        parent.wait()
        for pid in pids:  # the test failed: leave nothing behind
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_stopped_server_leaves_no_worker(vllm, monkeypatch):
    """`stop` (success, failure, interrupt) ends the server's whole process group, its workers too."""
    import time

    from evalkit.llm.vllm_server import VLLMServer

    monkeypatch.setenv("FAKE_VLLM_CHILD_PIDFILE", str(vllm / "worker.pid"))
    server = VLLMServer("fake/llm-7b", tensor_parallel_size=1, ready_timeout_s=60)
    server.ensure_started()
    pids = [int((vllm / name).read_text()) for name in ("pid", "worker.pid")]
    server.stop()
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)


def test_a_missing_executable_is_one_line(vllm):
    from evalkit.llm.vllm_server import VLLMServer

    server = VLLMServer("fake/llm-7b", tensor_parallel_size=1, executable="no-such-vllm")
    with pytest.raises(KitError, match=r"cannot start no-such-vllm serve .*; fix: install vllm"):
        server.ensure_started()


def test_a_server_whose_guard_is_killed_outright_ends_too(vllm):
    """Ray kills a killed actor's child processes (the guard) with SIGKILL: the server, the guard's
    child, must not outlive it (it would hold its GPUs and answer on its port)."""
    import signal
    import time

    from evalkit.llm.vllm_server import VLLMServer

    server = VLLMServer("fake/llm-7b", tensor_parallel_size=1, ready_timeout_s=60)
    server.ensure_started()
    pid = int((vllm / "pid").read_text())
    try:
        os.kill(server.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(pid)
    finally:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
        server.stop()
