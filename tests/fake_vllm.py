"""A stand-in for `vllm serve MODEL ... --host H --port P`: the OpenAI-compatible API on loopback.

Run as ``python tests/fake_vllm.py serve MODEL [vLLM's options]`` (tests put an executable named
``vllm`` that does this on PATH). It answers ``GET /v1/models`` with MODEL and chat completions
with `tests.loopback.chat_completion` (deterministic log-probabilities for the PRP and the
pointwise labels). ``FAKE_VLLM_MODE`` picks a behaviour:

- ``ok`` (default): ready after ``FAKE_VLLM_DELAY_S`` (0.3 s);
- ``never-ready``: runs but never listens;
- ``exit``: prints an error and exits with status 3 before listening;
- ``die-after:N``: exits (status 1) when the N+1th completion arrives, without answering it.

``FAKE_VLLM_ANSWER_S``: seconds each completion takes (default 0).

It listens on ``--host`` (a Ray replica: its node's address). With ``--distributed-executor-backend
ray`` it prints the ``RAY_ADDRESS`` it would join and exits (status 3) without one, so a test sees
the kit hand its cluster to the server (vLLM itself would start a Ray instance of its own).

``FAKE_VLLM_ARGV`` names a file that gets its argv as JSON; ``FAKE_VLLM_PIDFILE`` its pid.
``FAKE_VLLM_CHILD_PIDFILE``: it first starts a worker of its own (as vLLM's engine processes), a
sleeping process that ignores nothing and outlives it unless its process group is ended, and
writes the worker's pid there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.loopback import Loopback, chat_completion  # noqa: E402


def answer(message: str) -> dict:
    p = 0.05 + 0.9 * int(hashlib.sha256(message.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

    def step(token, labels):
        return token, math.log(0.9 * p), [(labels[0], math.log(0.9 * p)), (labels[1], math.log(0.9 * (1 - p)))]

    return chat_completion("Passage A", [step("A", ("A", "B")), step("Yes", ("Yes", "No"))])


class Server(Loopback):
    def __init__(self, model: str, host: str, port: int, die_after: int | None):
        self.model, self.die_after, self.served = model, die_after, 0
        super().__init__(port, host)

    def respond_get(self, path, headers):
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        return 404, {"error": "not found"}

    def respond(self, payload, headers):
        with self.lock:
            if self.die_after is not None and self.served >= self.die_after:
                print(f"fake vllm: dying after {self.served} completions", flush=True)
                os._exit(1)
            self.served += 1
        time.sleep(float(os.environ.get("FAKE_VLLM_ANSWER_S", "0")))
        return 200, answer(json.dumps(payload["messages"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("model")
    parser.add_argument("--tensor-parallel-size", type=int, required=True)
    parser.add_argument("--enable-prefix-caching", action="store_true")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--revision")
    parser.add_argument("--pipeline-parallel-size", type=int, default=1)
    parser.add_argument("--distributed-executor-backend", choices=["mp", "ray"])
    args, _ = parser.parse_known_args()
    if os.environ.get("FAKE_VLLM_ARGV"):
        Path(os.environ["FAKE_VLLM_ARGV"]).write_text(json.dumps(sys.argv[1:]))
    if os.environ.get("FAKE_VLLM_PIDFILE"):
        Path(os.environ["FAKE_VLLM_PIDFILE"]).write_text(str(os.getpid()))
    if os.environ.get("FAKE_VLLM_CHILD_PIDFILE"):
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL)
        Path(os.environ["FAKE_VLLM_CHILD_PIDFILE"]).write_text(str(worker.pid))
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    if args.distributed_executor_backend == "ray" and not os.environ.get("RAY_ADDRESS"):
        print("fake vllm: --distributed-executor-backend ray found no Ray cluster (RAY_ADDRESS)", flush=True)
        sys.exit(3)
    if args.distributed_executor_backend == "ray":
        print(f"fake vllm: workers placed on the Ray cluster at {os.environ['RAY_ADDRESS']}", flush=True)
    print(f"fake vllm: serving {args.model} on port {args.port} ({mode})", flush=True)
    if mode == "exit":
        print("fake vllm: CUDA out of memory", flush=True)
        sys.exit(3)
    if mode == "never-ready":
        time.sleep(3600)
    time.sleep(float(os.environ.get("FAKE_VLLM_DELAY_S", "0.3")))
    die_after = int(mode.split(":")[1]) if mode.startswith("die-after:") else None
    Server(args.model, args.host, args.port, die_after).serve_forever(0.05)


if __name__ == "__main__":
    main()
