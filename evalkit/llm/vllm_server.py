"""A vLLM server the kit starts for an open model entry (``backend: openai`` with ``serve: vllm``).

The kit runs ``vllm serve MODEL --tensor-parallel-size N --enable-prefix-caching --host
127.0.0.1 --port P`` (N: the visible GPUs unless ``tensor_parallel_size`` is set; P: a free
local port; ``--revision`` when the entry pins one; ``vllm_args`` appended) as an argument
list, never through a shell. A model too large for one node adds ``--pipeline-parallel-size
M`` (``pipeline_parallel_size`` above 1) and ``--distributed-executor-backend ray``
(``distributed_executor_backend``): vLLM then places its N x M workers on the GPUs of the
Ray cluster it joins (``RAY_ADDRESS`` in the server's environment). Several servers of one
model (data-parallel replicas) are `evalkit.llm.replicas`. It starts on the first request (a rerun whose judgments are
all cached starts nothing), is ready when ``GET /v1/models`` lists the model, and is stopped
when the reranking ends: on success, on failure and on an interrupt. A server that exits
before it is ready, never becomes ready within ``ready_timeout_s``, or dies mid-run is one
line naming the log file; the judgments made so far are already in the cache, so a rerun
resumes. The server's output goes to ``$EVALKIT_CACHE/vllm/server-HASH.log``.

Entries whose server the user runs keep ``base_url`` (no ``serve``).

The server dies with the kit, however the kit's process ends (SIGKILL, SIGTERM, SIGHUP, a
crash), and so do the server's own workers: it runs under a guard
(`evalkit.core.process_guard`) leading a process group of its own, which ends the whole group
when the kit's process is gone, when `stop` signals it, or when the server exits by itself
(tests/llm/test_vllm_server.py kills the parent with each signal and checks that neither the
server nor its worker survives).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from evalkit.core.devices import gpu_count
from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import file_sha256
from evalkit.core.process_guard import guarded
from evalkit.core.workspace import cache_root

HOST = "127.0.0.1"
POLL_S = 0.5
STOP_S = 30.0


def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def visible_gpus() -> int:
    return gpu_count()


def executable_identity(executable: str) -> dict:
    """What identifies the vLLM build `executable` runs: the file PATH resolves it to (its real
    path, size and modification time in ns) and, for a Python install (the file in ``bin/``
    beside ``lib/python*/site-packages``), the sha256 of each ``vllm-*.dist-info/RECORD`` there,
    which lists the sha256 of every installed file of vllm, its compiled kernels included.
    Installing another vllm build rewrites both, so its judgments are asked anew. Not seen: a
    build changed behind a launcher that stays byte-for-byte the same and has no RECORD beside
    it (say, a wrapper script starting a container), nor edits to an editable install's sources
    (RECORD does not list them); give such a build its own ``vllm_executable``. An executable
    not found is keyed by its name (starting it then fails with one line)."""
    found = shutil.which(executable)
    if found is None:
        return {"name": executable, "found": False}
    launcher = Path(found).absolute()
    real = launcher.resolve()
    stat = real.stat()
    records = sorted({*launcher.parent.parent.glob("lib/python*/*-packages/vllm-*.dist-info/RECORD"),
                      *real.parent.parent.glob("lib/python*/*-packages/vllm-*.dist-info/RECORD")})
    return {"path": str(real), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "installed": {str(r): file_sha256(r) for r in records}}


DISTRIBUTED_BACKENDS = ("mp", "ray")  # vLLM's --distributed-executor-backend: one node's processes, or Ray's


class VLLMServer:
    """One `vllm serve` process on a free port of `host`, started on demand and stopped by `stop`.

    `env` is added to the server's environment (a replica's ``CUDA_VISIBLE_DEVICES``, the
    ``RAY_ADDRESS`` of the cluster a distributed model joins); `label` names its log apart from
    the other replicas' (``server-HASH-LABEL.log``)."""

    def __init__(self, model: str, revision: str | None = None, tensor_parallel_size: int | None = None,
                 executable: str = "vllm", args: list[str] | tuple[str, ...] = (), ready_timeout_s: float = 1800.0,
                 log_dir: Path | None = None, pipeline_parallel_size: int | None = None,
                 distributed_executor_backend: str | None = None, host: str = HOST, env: dict | None = None,
                 label: str = ""):
        for name, size in (("tensor_parallel_size", tensor_parallel_size),
                           ("pipeline_parallel_size", pipeline_parallel_size)):
            if size is not None and int(size) < 1:
                raise DataError("model settings", f"{name}={size} must be positive; fix the model settings")
        if distributed_executor_backend not in (None, *DISTRIBUTED_BACKENDS):
            raise DataError("model settings", f"distributed_executor_backend {distributed_executor_backend!r} is "
                            "not one of "
                           f"{DISTRIBUTED_BACKENDS}; fix the model settings")
        if not isinstance(args, (list, tuple)) or not all(isinstance(a, str) for a in args):
            raise DataError("model settings", f"vllm_args {args!r} must be a list of strings (one per argument)")
        self.model, self.revision = model, revision
        self.tensor_parallel_size = int(tensor_parallel_size or max(visible_gpus(), 1))
        self.pipeline_parallel_size = int(pipeline_parallel_size or 1)
        self.distributed_executor_backend = distributed_executor_backend
        self.executable, self.args, self.ready_timeout_s = executable, list(args), float(ready_timeout_s)
        self.host, self.env = host, dict(env or {})
        self.port = free_port(host)
        if log_dir is None:
            log_dir = cache_root() / "vllm"
        digest = hashlib.sha256(f"{model}\0{revision}".encode()).hexdigest()[:12]
        self.log_path = Path(log_dir) / f"server-{digest}{'-' + label if label else ''}.log"
        self.process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    @property
    def gpus(self) -> int:
        """The GPUs one server of this command uses (tensor x pipeline parallel size)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def identity(self) -> str:
        """What makes this server's answers, for the judgment cache's key: the command without its
        port (a free one each start, so a restarted server reuses its judgments) and with the
        host it listens on written as 127.0.0.1 (a replica on another node answers as one here
        does: `evalkit.llm.replicas`), the vLLM
        build the executable runs (`executable_identity`), so judgments of one build are never
        served for another, and the ``VLLM_*`` environment variables the server inherits (they
        choose kernels and backends)."""
        argv = self.argv()
        argv[argv.index("--host") + 1] = HOST
        at = argv.index("--port")
        return json.dumps({"command": ["vllm"] + argv[1:at] + argv[at + 2:],
                           "executable": executable_identity(self.executable),
                           "environment": {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}},
                          sort_keys=True)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def argv(self) -> list[str]:
        argv = [self.executable, "serve", self.model, "--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.pipeline_parallel_size > 1:
            argv += ["--pipeline-parallel-size", str(self.pipeline_parallel_size)]
        if self.distributed_executor_backend:
            argv += ["--distributed-executor-backend", self.distributed_executor_backend]
        argv += ["--enable-prefix-caching", "--host", self.host, "--port", str(self.port)]
        if self.revision:
            argv += ["--revision", self.revision]
        return argv + self.args

    def ensure_started(self) -> None:
        """Start the server and wait until it answers (once; later calls check it is alive)."""
        with self._lock:
            if self.process is None:
                self._start()
        self.check()

    def _start(self) -> None:
        if shutil.which(self.executable) is None:
            raise MissingPrerequisite(f"cannot start {self.executable} serve (no such executable on PATH)",
                                      "install vllm (pip install vllm) or set vllm_executable")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:  # the guard leads a new process group: the server and its workers
            self.process = subprocess.Popen(guarded(self.argv()), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            env={**os.environ, **self.env} if self.env else None)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._ready():
            if self.process.poll() is not None:
                raise MissingPrerequisite(f"vllm serve {self.model} exited with status {self.process.returncode} "
                                          f"before it answered ({self._last_line()})", f"see {self.log_path}")
            if time.monotonic() >= deadline:
                self.stop()
                raise MissingPrerequisite(f"vllm serve {self.model} did not answer {self.base_url}/models within "
                                          f"ready_timeout_s={self.ready_timeout_s:g} s; stopped it",
                                          f"see {self.log_path}")
            time.sleep(POLL_S)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                listed = json.loads(resp.read(1 << 20)).get("data") or []  # a model list: bounded
        except (OSError, ValueError, AttributeError):
            return False
        return any(isinstance(m, dict) and m.get("id") == self.model for m in listed)

    def check(self) -> None:
        """A KitError when the started server has exited (called before a request is retried)."""
        if self.process is not None and self.process.poll() is not None:
            raise MissingPrerequisite(f"the vLLM server of {self.model} exited mid-run "
                                      f"(status {self.process.returncode}: {self._last_line()})",
                                      f"the judgments so far are cached, rerun to resume; see {self.log_path}")

    def healthy(self, tries: int = 3) -> bool:
        """Whether the started server still runs and lists its model (`tries` times, `POLL_S` apart):
        a replica that is not is taken out (`evalkit.llm.replicas`)."""
        for attempt in range(tries):
            if self.process is None or self.process.poll() is not None:
                return False
            if self._ready():
                return True
            if attempt < tries - 1:
                time.sleep(POLL_S)
        return False

    def _last_line(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no log"
        return lines[-1].strip()[:200] if lines else "no output"

    def stop(self) -> None:
        """Stop the server's process group (the guard, the server, its workers): SIGTERM, then
        SIGKILL after `STOP_S`."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is not None:  # its workers may outlive it
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass
