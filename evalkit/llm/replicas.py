"""One vLLM model served by several replicas (data parallel), the judgments spread over them.

`local_replicas` starts N ``vllm serve`` processes on this machine, each on its own port and,
where GPUs are visible, its own ``CUDA_VISIBLE_DEVICES`` (replica i gets GPUs i*G .. i*G+G-1,
G = tensor x pipeline parallel size; ``tensor_parallel_size`` defaults to the visible GPUs
divided by N). `ray_replicas` starts them on a Ray cluster (the one this process is connected
to, else ``ray.init()``: ``RAY_ADDRESS`` when set, else a local one), one Ray actor per replica
holding G GPUs (one CPU on a cluster without GPUs), each running ``vllm serve`` on its node and
listening on the node's address; ``tensor_parallel_size`` defaults to 1 there. A model too
large for one node (``distributed_executor_backend: ray``) is served by vLLM itself over the
cluster: each replica is a ``vllm serve ... --distributed-executor-backend ray`` on this
machine with the cluster's ``RAY_ADDRESS``, and vLLM places its tensor x pipeline parallel
workers on the cluster's GPUs. A replica that does not fit (more GPUs than the cluster has,
or than its largest node has without ``distributed_executor_backend: ray``) is one line before
anything starts.

`ReplicatedBackend` sends each prompt to the live replica with the fewest prompts in flight
(the lowest index on a tie); each replica has the template backend's options and its own
``max_in_flight`` requests. The answer of a prompt does not depend on the replica that gave
it (every replica runs the same command, so the judgment cache's key, `numerics`, is that of
one server: `VLLMServer.identity`, written for 127.0.0.1 and without the port), and the
scheduler (`evalkit.llm.schedule`) hands every query its own answers in its own order, so
the judgments, their cache rows and the run are those of one server, whichever replica
answered and when. A replica that dies mid-job (its process exits, its actor or node is lost)
is taken out: the prompts it had not answered go to the others, and the result is the same;
when every replica is gone the run stops with one line (the judgments so far are cached).
A replica that cannot start ends the run with one line naming the replica (and its node) and
the cause. Ray actors hand the driver's ``VLLM_*`` environment to their servers (it is in the
key) and refuse a node whose vllm build (the sha256 of its installed RECORD files,
`vllm_server.executable_identity`) is not this machine's.

The replicas are not in the key: the sidecar records them (`ReplicaSet.describe`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, replace

from evalkit.core.errors import DataError, KitError, MissingPrerequisite, RequestError
from evalkit.core.workers import PROBLEM, check_workers
from evalkit.llm import vllm_server
from evalkit.llm.backend import Prompts, Usage
from evalkit.llm.openai_api import OpenAIBackend, api_numerics, gathered
from evalkit.llm.vllm_server import VLLMServer, executable_identity

PLACEMENTS = ("local", "ray")  # replicas on this machine, or on a Ray cluster
CHECK_S = 30.0  # how long a Ray replica may take to say whether it is alive


@dataclass(frozen=True)
class ServeCommand:
    """What a ``serve: vllm`` entry asks the kit to run (`VLLMServer`'s settings without a place)."""

    model: str
    revision: str | None = None
    tensor_parallel_size: int | None = None
    executable: str = "vllm"
    args: tuple[str, ...] = ()
    ready_timeout_s: float = 1800.0
    pipeline_parallel_size: int | None = None
    distributed_executor_backend: str | None = None

    def server(self, **where) -> VLLMServer:
        """The server of this command; `where`: `VLLMServer`'s host, env, label, log_dir."""
        return VLLMServer(self.model, self.revision, self.tensor_parallel_size, self.executable, self.args,
                          self.ready_timeout_s, pipeline_parallel_size=self.pipeline_parallel_size,
                          distributed_executor_backend=self.distributed_executor_backend, **where)

    @property
    def gpus(self) -> int:
        """GPUs of one server (tensor x pipeline parallel size; tensor 1 where unset)."""
        return int(self.tensor_parallel_size or 1) * int(self.pipeline_parallel_size or 1)


def gpu_ids() -> list[str]:
    """The GPUs this process may give its servers, as ``CUDA_VISIBLE_DEVICES`` names them (else 0..n-1)."""
    count = vllm_server.visible_gpus()
    named = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return named[:count] if named else [str(i) for i in range(count)]


def _count(replicas) -> int:
    """The number of replicas: the run's worker count, by the one rule (`evalkit.core.workers`)."""
    if replicas is None:
        raise RequestError("workers", PROBLEM, value=replicas)
    return check_workers(replicas)


def _label(index: int, count: int) -> str:
    return f"replica {index + 1} of {count}"


class ReplicaSet:
    """The servers of one model (`VLLMServer` or `RayServer`), started together, stopped together."""

    def __init__(self, servers: list, placement: str = "local", before_start=None):
        if not servers:
            raise RequestError("replicas", "names no server; a replica set needs at least one")
        identities = {server.identity for server in servers}
        if len(identities) != 1:
            raise DataError("replicas", "the replicas of one model must run one command (their identities differ)")
        self.servers, self.placement = list(servers), placement
        self.identity = identities.pop()
        self.model = servers[0].model
        self._before_start = before_start
        self._started = False
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.servers)

    def ensure_started(self) -> None:
        """Start every replica at once and wait until all answer (once); a replica that cannot
        start stops the others and is one line naming it."""
        with self._lock:
            if self._started:
                return
            if self._before_start is not None:
                self._before_start(self)
            failures: list[tuple[int, Exception]] = []

            def start(index: int, server) -> None:
                try:
                    server.ensure_started()
                except KitError as exc:
                    failures.append((index, exc))

            threads = [threading.Thread(target=start, args=(i, s), daemon=True) for i, s in enumerate(self.servers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                index, exc = min(failures, key=lambda f: f[0])
                self.stop()
                raise DataError(f"{self.where(index)} of {self.model}", f"did not start: {exc}") from None
            self._started = True

    def where(self, index: int) -> str:
        """``replica I of N`` (and its node, for a Ray replica)."""
        node = getattr(self.servers[index], "node", None)
        return _label(index, len(self)) + (f" (node {node})" if node else "")

    def alive(self, index: int) -> bool:
        """Whether replica `index` still runs and answers (`VLLMServer.healthy`)."""
        return self.servers[index].healthy()

    def stop(self) -> None:
        """Stop every replica (each `stop` ends its server's process group)."""
        for server in self.servers:
            server.stop()
        self._started = False

    def describe(self) -> dict:
        """For the sidecar (not the key): how many replicas, where, and on which nodes and devices."""
        first = self.servers[0]
        return {"replicas": len(self), "placement": self.placement,
                "tensor_parallel_size": first.tensor_parallel_size,
                "pipeline_parallel_size": first.pipeline_parallel_size,
                "distributed_executor_backend": first.distributed_executor_backend,
                "nodes": [getattr(s, "node", None) or "this machine" for s in self.servers],
                "devices": [getattr(s, "devices", None) or s.env.get("CUDA_VISIBLE_DEVICES") or ""
                            for s in self.servers]}


def local_replicas(command: ServeCommand, replicas: int) -> ReplicaSet:
    """`replicas` servers of `command` on this machine, each with its own GPUs where GPUs are
    visible (`gpu_ids`), unless vLLM places the workers over Ray (``distributed_executor_backend:
    ray``)."""
    count = _count(replicas)
    ids = gpu_ids()
    distributed = command.distributed_executor_backend == "ray"
    if command.tensor_parallel_size is None and not distributed:
        command = replace(command, tensor_parallel_size=max(len(ids) // (count * int(command.pipeline_parallel_size
                                                                                     or 1)), 1))
    per = command.gpus
    envs: list[dict] = [{} for _ in range(count)]
    if count > 1 and ids and not distributed:
        if count * per > len(ids):
            raise RequestError("workers", f"{count} replicas of {command.model} at {per} GPU(s) each need "
                               f"{count * per} GPUs; "
                           f"{len(ids)} are visible: lower the workers or tensor_parallel_size")
        envs = [{"CUDA_VISIBLE_DEVICES": ",".join(ids[i * per:(i + 1) * per])} for i in range(count)]
    return ReplicaSet([command.server(env=env, label=f"r{i}" if count > 1 else "") for i, env in enumerate(envs)],
                      "local")


def _ray():
    try:
        import ray  # lazy: the cluster extra; only a run on Ray loads it
    except ImportError:
        raise MissingPrerequisite("replicas on Ray need the ray package", "pip install 'evalkit[cluster]'") from None
    return ray


def connect():
    """Ray, connected: the cluster this process already joined, else ``ray.init()`` (``RAY_ADDRESS``
    when set, else a local cluster that ends with this process)."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(log_to_driver=False)
    return ray


def ray_replicas(command: ServeCommand, replicas: int) -> ReplicaSet:
    """`replicas` servers of `command` on the Ray cluster: one actor per replica (`RayServer`), or,
    for a model vLLM spreads over the cluster (``distributed_executor_backend: ray``), servers on
    this machine joined to the cluster. Ray is connected when the replicas start, not before."""
    count = _count(replicas)
    if command.distributed_executor_backend == "ray":
        servers = [command.server(label=f"r{i}" if count > 1 else "") for i in range(count)]

        def join(replica_set: ReplicaSet) -> None:
            ray = connect()
            _fits(ray, command, count, whole_node=False)
            for server in replica_set.servers:
                server.env["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address

        return ReplicaSet(servers, "ray", join)
    command = replace(command, tensor_parallel_size=command.tensor_parallel_size or 1)
    environment = {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}
    servers = [RayServer(command, i, count, environment) for i in range(count)]

    def place(replica_set: ReplicaSet) -> None:
        ray = connect()
        options = _fits(ray, command, count, whole_node=True)
        for server in replica_set.servers:
            server.options = options

    return ReplicaSet(servers, "ray", place)


def _fits(ray, command: ServeCommand, count: int, whole_node: bool) -> dict:
    """The actor options of one replica; a KitError when the cluster cannot hold `count` of them."""
    gpus = ray.cluster_resources().get("GPU", 0)
    need = count * command.gpus
    if gpus:
        if need > gpus:
            raise RequestError("workers", f"{count} replicas of {command.model} at {command.gpus} GPU(s) each "
                               f"need {need} GPUs; the "
                           f"Ray cluster has {gpus:g}: lower the workers or tensor_parallel_size")
        largest = max((node.get("Resources", {}).get("GPU", 0) for node in ray.nodes() if node.get("Alive")),
                      default=0)
        if whole_node and command.gpus > largest:
            raise DataError("model settings", f"a replica of {command.model} needs {command.gpus} GPUs and the "
                            "largest node of the Ray "
                           f"cluster has {largest:g}: set distributed_executor_backend: ray (vLLM over the cluster's "
                           "nodes) or lower tensor_parallel_size / pipeline_parallel_size")
        return {"num_gpus": command.gpus, "num_cpus": 0}
    cpus = ray.cluster_resources().get("CPU", 0)
    if whole_node and count > cpus:
        raise RequestError("workers", f"{count} replicas of {command.model} need {count} CPUs (one each on a "
                           "cluster without GPUs); "
                       f"the Ray cluster has {cpus:g}: lower the workers")
    return {"num_cpus": 1}


def installed_build(executable: str) -> list[str]:
    """The sha256 of the vllm RECORD files beside `executable`: the build, whatever its path or mtime."""
    return sorted(executable_identity(executable).get("installed", {}).values())


def _devices() -> str:
    """The GPUs Ray gave this actor, by name where nvidia-smi can tell."""
    import ray

    ids = [str(i) for i in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]
    if not ids:
        return "cpu"
    if shutil.which("nvidia-smi"):
        try:
            names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", ",".join(ids)],
                                   capture_output=True, text=True, timeout=10).stdout.split("\n")
            return ", ".join(f"{i}: {n.strip()}" for i, n in zip(ids, names) if n.strip()) or ",".join(ids)
        except (OSError, subprocess.SubprocessError):
            pass
    return ",".join(ids)


class ReplicaActor:
    """What one Ray actor runs: a `VLLMServer` on its node, listening on the node's address."""

    def __init__(self, command: ServeCommand, label: str):
        import ray

        self.node = ray.util.get_node_ip_address()
        self.server = command.server(host=self.node, label=label)

    def start(self) -> tuple[str, str, str, list[str]]:
        self.server.ensure_started()
        return self.server.base_url, self.node, _devices(), installed_build(self.server.executable)

    def check(self) -> None:
        self.server.check()

    def healthy(self) -> bool:
        return self.server.healthy()

    def stop(self) -> None:
        self.server.stop()


class RayServer:
    """A `VLLMServer` in a Ray actor (`ReplicaActor`), as the driver sees it: the same interface."""

    def __init__(self, command: ServeCommand, index: int, count: int, environment: dict[str, str]):
        local = command.server()  # the command as this machine writes it: the key of one server
        self.identity, self.model = local.identity, command.model
        self.tensor_parallel_size = local.tensor_parallel_size
        self.pipeline_parallel_size = local.pipeline_parallel_size
        self.distributed_executor_backend, self.env = local.distributed_executor_backend, {}
        self.command, self.label, self.environment = command, _label(index, count), dict(environment)
        self.options: dict = {"num_cpus": 1}
        self.actor = None
        self.base_url = self.node = self.devices = None
        self._lock = threading.Lock()

    def _call(self, method: str, timeout: float | None = None):
        ray = _ray()
        try:
            return ray.get(getattr(self.actor, method).remote(), timeout=timeout)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, KitError):
                raise cause from None  # the replica's own line, of its own kind
            raise DataError(f"{self.label} of {self.model}",
                            f"{type(cause or exc).__name__}: {str(cause or exc).splitlines()[0]}") from None
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            raise DataError(f"the Ray actor of {self.label} of {self.model}", "is gone or does not answer "
                           f"({type(exc).__name__}); its node may have been lost") from None

    def ensure_started(self) -> None:
        with self._lock:
            if self.actor is not None:
                return
            ray = _ray()
            options = dict(self.options, max_restarts=0)
            if self.environment:
                options["runtime_env"] = {"env_vars": self.environment}
            self.actor = ray.remote(ReplicaActor).options(**options).remote(self.command, f"r{self.label.split()[1]}")
            self.base_url, self.node, self.devices, build = self._call("start")
            if build != installed_build(self.command.executable):
                raise DataError(f"node {self.node}", "runs another vllm build than this machine (the sha256 of its "
                               "installed RECORD differs), so its judgments would be keyed wrongly; install the same "
                               "vllm on every node")

    def check(self) -> None:
        if self.actor is not None:
            self._call("check", CHECK_S)

    def healthy(self) -> bool:
        try:
            return self.actor is not None and bool(self._call("healthy", CHECK_S))
        except KitError:
            return False

    def stop(self) -> None:
        actor, self.actor = self.actor, None
        if actor is None:
            return
        ray = _ray()
        try:
            ray.get(actor.stop.remote(), timeout=vllm_server.STOP_S + CHECK_S)
        except Exception:  # gone already, or does not answer: killed below
            pass
        ray.kill(actor)


class ReplicatedBackend:
    """The OpenAI-compatible backend over a `ReplicaSet`: every prompt to the live replica with
    the fewest prompts in flight; a dead replica's unanswered prompts to the others."""

    def __init__(self, template: OpenAIBackend, replicas: ReplicaSet):
        self.model, self.revision, self.options = template.model, template.revision, template.options
        self.numerics = api_numerics(replicas.identity, template.options)  # one server's: the same key
        self.truncate = template.truncate
        self.template, self.replicas, self.server = template, replicas, replicas
        self._backends: dict[tuple[int, str], OpenAIBackend] = {}
        self._load = [0] * len(replicas)
        self._dead: set[int] = set()
        self._lock = threading.Lock()

    @property
    def usage(self) -> Usage:
        """Every replica's usage, summed."""
        total = Usage()
        for backend in list(self._backends.values()):
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(backend.usage, name))
        return total

    def _backend(self, index: int) -> OpenAIBackend:
        server = self.replicas.servers[index]
        with self._lock:
            key = (index, server.base_url)
            if key not in self._backends:
                self._backends[key] = self.template.at(server.base_url, server)
            return self._backends[key]

    def _pick(self) -> int | None:
        with self._lock:
            live = [i for i in range(len(self._load)) if i not in self._dead]
            if not live:
                return None
            index = min(live, key=lambda i: (self._load[i], i))
            self._load[index] += 1
            return index

    def _release(self, index: int, dead: bool = False) -> None:
        with self._lock:
            self._load[index] -= 1
            if dead:
                self._dead.add(index)

    @staticmethod
    def _settle(out: Future, result=None, error: BaseException | None = None) -> None:
        try:
            out.set_exception(error) if error is not None else out.set_result(result)
        except InvalidStateError:  # cancelled by the scheduler meanwhile
            pass

    def _send(self, one: Prompts, out: Future, last: BaseException | None = None) -> None:
        index = self._pick()
        if index is None:
            self._settle(out, error=KitError(f"all {len(self._load)} replicas of {self.model} are gone; the last: "
                                             f"{last}"))
            return
        try:
            inner = self._backend(index).submit(one)[0]
        except KitError as exc:
            self._failed(index, one, out, exc)
            return
        out.add_done_callback(lambda f: inner.cancel() if f.cancelled() else None)
        inner.add_done_callback(lambda f: self._answered(index, f, one, out))

    def _failed(self, index: int, one: Prompts, out: Future, exc: BaseException) -> None:
        if isinstance(exc, KitError) and not self.replicas.alive(index):
            self._release(index, dead=True)
            self._send(one, out, KitError(f"{self.replicas.where(index)}: {exc}"))  # to another replica
        else:
            self._release(index)
            self._settle(out, error=exc)

    def _answered(self, index: int, inner: Future, one: Prompts, out: Future) -> None:
        if inner.cancelled():
            self._release(index)
            out.cancel()
            return
        exc = inner.exception()
        if exc is None:
            self._release(index)
            self._settle(out, inner.result())
        else:
            self._failed(index, one, out, exc)

    def submit(self, prompts: Prompts) -> list[Future]:
        """One future per prompt (every replica started first, together)."""
        self.replicas.ensure_started()
        futures = []
        for suffix in prompts.suffixes:
            out: Future = Future()
            self._send(replace(prompts, suffixes=(suffix,)), out)
            futures.append(out)
        return futures

    def first_label_probs(self, prompts: Prompts) -> list[float]:
        return gathered(self.submit(prompts))
