"""The Ray executor (``executor="ray"``): a whole corpus encoded and searched by Ray Core actors,
with the numbers of the in-process executor (`evalkit.retrieval.executors`).

- The cluster: with ``RAY_ADDRESS`` set the kit joins it (and leaves it running), the address
  checked first (`check_address`) and Ray's saved token used (`use_token_if_saved`); without,
  it starts a local cluster on this machine and stops it after the run (a reaper,
  `evalkit.core.process_guard`, ends its processes with this process, however it ends); a Ray
  already started in this process (``ray.init`` by the caller) is used as it is.
- The workers: one actor each, holding the model (loaded once, on its first batch). A worker
  takes one GPU where the cluster has GPUs, else a share of the CPUs (at most `PER_CPU` workers
  a CPU: `check_count`), and runs torch with the driver's thread count (`torch_threads`: CPU
  kernels round by their thread count). The device a worker encodes on is chosen on the worker
  (a model whose settings name no device loads on the worker's own GPU, whatever the driver has:
  `evalkit.retrieval.embeddings.Encoder`, `evalkit.models.paper`); the cluster's GPUs say which
  kind before any worker starts (`encoding_device`: part of the run's key and the index's,
  `evalkit.retrieval.executors.device_part`), and a worker whose torch sees another kind than
  the cluster gave it (a GPU node without a CUDA build of torch) is one line naming its node.
- What moves: the driver plans the index's batches (the corpus's distinct model inputs,
  `evalkit.retrieval.vector_index.batch_plan`, whatever the worker count); the workers encode
  them with the model alone (no embedding cache: workers write no file of the kit's stores) and
  the driver commits them in corpus order into the one index under its lock, as in-process. The
  vectors come back through a file per batch beside the index when every worker sees the
  driver's cache folder (a shared filesystem: the driver writes a probe file there and each
  worker reads it), else through Ray's object store (also when
  ``EVALKIT_RAY_VECTORS=object-store``); the run's notes say which. At most two batches per
  worker are in flight, so the driver's memory is bounded by batches, not the corpus.
- Failures: a worker killed mid-batch is restarted by Ray and its batches are retried
  (`RESTARTS`); one "temporarily unavailable" (its node lost) is asked again while the head
  answers (`UNAVAILABLE_S`); the result is the same, since a batch's vectors do not depend on who
  encodes them. A worker that fails (a model it cannot load) ends the run with one line naming
  the worker and the cause; one on a node whose Python cannot import the kit, with one line
  naming the node (`no_kit`); a cluster whose head stops answering, with one line, this process
  leaving it alive. A killed driver leaves the committed batches: the next run resumes after
  them (the batches encoded but not committed are encoded again).
- The search: the finished index, in shards of `SEARCH_ROWS` rows, each searched exactly by a
  worker that sees the index folder (else on the driver), merged per query by
  `evalkit.retrieval.exact_search.merge_top`.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import socket
import subprocess
import time
import uuid
from collections import deque
from pathlib import Path

import numpy as np
import psutil
import ray
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

try:  # Ray's own step for a saved token (`use_token_if_saved`); private, and absent before token authentication
    from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available
except ImportError:
    maybe_enable_token_auth_if_token_available = None

try:  # Ray's actor table (private, but the one place that holds a dead actor's node without a dashboard: `no_kit`)
    from ray._private.state import actors as actor_table
except ImportError:
    actor_table = None

from evalkit.core.devices import device_kind, gpu_count, resolve_device
from evalkit.core.errors import DataError, KitError, MissingPrerequisite, RequestError
from evalkit.core.process_guard import reaping
from evalkit.core.version import __version__
from evalkit.core.workspace import cache_root
from evalkit.retrieval.exact_search import merge_top, spans
from evalkit.retrieval.vector_index import VectorIndex

RESTARTS = 3  # times Ray restarts a killed worker (and retries its batches) before the run stops
IN_FLIGHT = 2  # batches per worker sent ahead of the commits
SEARCH_ROWS = 1 << 18  # index rows a worker searches at once
# how long a starting raylet waits for its agents (Ray's default is too short on a loaded machine)
START_WAIT_ENV, START_WAIT_S = "RAY_raylet_start_wait_time_s", "60"
START_ATTEMPTS = 3  # tries to start a local cluster
PER_CPU = 2  # CPU workers per CPU of a cluster at most (more only queue for the cores)
UNAVAILABLE_S = 120  # seconds a worker "temporarily unavailable" is asked again (Ray declares a lost node dead sooner)
# how long Ray lets this process wait for a head that went away before it ends the process (default 60 s): long
# enough for the kit to notice (`RayExecutor._get`) and leave the cluster with its one line
RECONNECT_ENV, RECONNECT_S = "RAY_gcs_rpc_server_reconnect_timeout_s", "600"
PROBE_S = 5  # seconds RAY_ADDRESS has to answer (connect, then gRPC) before the kit says it does not
VECTORS_ENV = "EVALKIT_RAY_VECTORS"  # "object-store": vectors through Ray's object store even on a shared path


def children() -> set[int]:
    """The process ids of this process's descendants."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


RAY_COMMAND = re.compile(r"(^|[/\s])ray(::|/)")  # Ray's binaries and scripts (.../ray/...) and its workers (ray::...)


def of_ray(pids: set[int]) -> set[int]:
    """The processes among `pids` that are Ray's (its GCS, raylet, agents and workers: their command
    lines name Ray's package or ``ray::``), so that what another thread of this process started in
    the meantime (a notebook kernel's joblib pool) is never ended with the cluster."""
    found = set()
    for pid in pids:
        try:
            if RAY_COMMAND.search(" ".join(psutil.Process(pid).cmdline())):
                found.add(pid)
        except psutil.Error:  # ended already
            pass
    return found


def end(pids: set[int]) -> None:
    """Kill the processes `pids` (a local start that failed: its GCS, raylet and agents, which Ray
    no longer holds when its start raises) and wait for them, a few seconds at most."""
    found = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            process.kill()
            found.append(process)
        except psutil.Error:  # gone by itself meanwhile
            pass
    psutil.wait_procs(found, timeout=10)


def torch_threads() -> int:
    """The driver's torch threads, which every CPU worker takes: CPU kernels give other last bits
    at another thread count, so workers that took their share of the cores would not give the
    in-process run's vectors (more threads than cores costs time, never a number)."""
    import torch  # the models extra: lazy, as the executor's other torch use (an optional extra)

    return torch.get_num_threads()


def check_count(count: int | None, gpus: int, cpus: float, where: str) -> None:
    """One line when `count` workers do not fit `where`: one GPU each, else at most `PER_CPU` per CPU."""
    most = gpus if gpus else max(1, int(cpus * PER_CPU))
    if count is not None and count > most:
        holds = f"{gpus} GPUs, one per worker" if gpus else f"{cpus:g} CPUs, at most {PER_CPU} workers per CPU"
        raise RequestError("workers", f"asks for {count} Ray workers; {where} holds at most {most} ({holds}): ask "
                           f"for at most {most}", value=count)


def check_address(value: str) -> str:
    """``RAY_ADDRESS`` checked before Ray sees it (Ray retries an address that does not answer for
    minutes): one line for an empty value, whitespace (a trailing newline), a port that is not a
    whole number 1-65535, nothing listening there, or a listener that does not speak gRPC (not a
    Ray head), each within `PROBE_S` seconds. ``auto`` goes to Ray, which finds a cluster started
    on this machine or says there is none."""
    fix = "set it to the head's address as `ray start --head` prints it (host:port), or unset it for a local cluster"
    if not value.strip():
        raise MissingPrerequisite("RAY_ADDRESS is set but empty", fix)
    if any(c.isspace() for c in value):
        raise MissingPrerequisite(f"RAY_ADDRESS={value!r} holds whitespace (a trailing newline?)", fix)
    if value == "auto":
        return value
    host, colon, port = value.removeprefix("ray://").rpartition(":")
    if not colon or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise MissingPrerequisite(f"RAY_ADDRESS={value} is not host:port with a port 1-65535", fix)
    host = host.strip("[]")  # an IPv6 address in brackets
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            pass
    except OSError as exc:
        raise MissingPrerequisite(f"nothing answers at RAY_ADDRESS={value} ({exc.strerror or exc})",
                                  "start the head there (`ray start --head`), or unset RAY_ADDRESS for a local "
                                  "cluster") from None
    if not speaks_http2(host, int(port)):
        raise MissingPrerequisite(f"RAY_ADDRESS={value} answers, but not as a Ray head (no gRPC answer within "
                                  f"{PROBE_S} s)", "point it at the head's port (6379 unless `ray start --head` "
                                  "printed another)")
    return value


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS frame


def speaks_http2(host: str, port: int) -> bool:
    """Whether the listener at host:port answers HTTP/2's preface with a SETTINGS frame (a frame
    header of type 4 on stream 0), as every gRPC server, Ray's head among them, does first."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_S) as conn:
            conn.sendall(HTTP2_PREFACE)
            header = b""
            while len(header) < 9:
                part = conn.recv(9 - len(header))
                if not part:
                    return False
                header += part
    except OSError:  # a timeout, a reset
        return False
    return header[3] == 4 and int.from_bytes(header[5:9], "big") & 0x7FFFFFFF == 0


def use_token_if_saved() -> None:
    """Join with Ray's saved token (``~/.ray/auth_token``, which a local ``ray.init`` writes) as
    ``ray start`` does: a head started while the token exists requires it, and ``ray.init(address=)``
    alone does not read it. ``RAY_AUTH_MODE`` set by the user is left as it is."""
    if maybe_enable_token_auth_if_token_available is None:
        return
    loud = logging.getLogger("ray")
    level = loud.level
    loud.setLevel(logging.ERROR)  # Ray's notice that token authentication is on
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        loud.setLevel(level)


def one_line(exc: BaseException) -> str:
    """The cause of a worker's failure in one line (the kit's own line when it is a KitError)."""
    cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
    text = " ".join(str(cause).split()) or type(cause).__name__
    return text if isinstance(cause, KitError) else f"{type(cause).__name__}: {text}"


KIT_MISSING = ("No module named 'evalkit'", "No module named 'evalkit.")  # what a worker without the kit says


def without_kit(exc: BaseException) -> bool:
    """Whether a worker died because its Python cannot import the kit (its node joined without
    it: the worker's class is the kit's, so Ray fails to create it there)."""
    return any(said in str(exc) for said in KIT_MISSING)


def no_kit(exc: RayActorError, who: str) -> KitError:
    """The one line for a worker on a node without the kit: the node (its id and address, from
    Ray's actor table) and the fix."""
    node, address = "?", "?"
    try:
        found = (actor_table(actor_id=exc.actor_id) or {}).get("Address") or {}
        node, address = (found.get("NodeID") or "?")[:8], found.get("IPAddress") or "?"
    except Exception:  # a Ray without that table (private), or whose rows changed: the line says less
        pass
    return MissingPrerequisite(f"{who} cannot start on node {node} ({address}): its Python cannot import evalkit "
                               "(No module named 'evalkit'), so the node joined the cluster without the kit",
                               f"install the kit there, the driver's version (pip install 'evalkit[cluster]=="
                               f"{__version__}' in the Python its `ray start` runs), or send it with the job: "
                               "ray.init(address=..., runtime_env={'py_modules': [evalkit]}) before the run")


@ray.remote
class Worker:
    """One Ray worker: encodes batches and searches shards of an index with the model of the run's
    payload (its encode function and vector caches, sent once through the object store and kept
    with the model loaded; a worker Ray restarts fetches it again)."""

    def __init__(self, threads: int | None):
        os.environ["EVALKIT_PROGRESS"] = "off"  # the driver shows the one bar of the job
        if threads is not None:  # the driver's torch threads: CPU kernels round by their thread count
            import torch  # the models extra: the worker encodes with torch

            torch.set_num_threads(threads)
        self.payload: tuple = (None, None)
        self.indexes: dict = {}

    def where(self, probe: str, token: str) -> tuple[str, bool, str]:
        """(this worker's host, Ray node and device, whether it reads the driver's probe file, the
        device kind a model with no device named loads on here: `resolve_device` on this worker)."""
        import torch

        kind = device_kind(resolve_device())
        device = torch.cuda.get_device_name(0) if kind == "cuda" else f"{kind} ({platform.machine()})"
        try:
            sees = Path(probe).read_text(encoding="utf-8") == token
        except OSError:
            sees = False
        node = f"{socket.gethostname()} (node {ray.get_runtime_context().get_node_id()[:8]})"
        return f"{node}: {device}", sees, kind

    def _model(self, box: list):
        """The payload in `box` (a list, so Ray passes the reference, not the value), fetched once."""
        if self.payload[0] != box[0].hex():
            self.payload = (box[0].hex(), ray.get(box[0]))
        return self.payload[1]

    def encode(self, box: list, batch: list, path: str | None):
        """The model's vectors of `batch` (no embedding cache: the driver alone writes files of the
        kit's stores), returned, or saved at `path` (a file only this call writes) when every
        worker sees the driver's cache folder."""
        vectors = np.asarray(self._model(box)(batch), dtype=np.float32)
        if path is None:
            return vectors
        temporary = f"{path}.{os.getpid()}.tmp.npy"
        np.save(temporary, vectors)
        os.replace(temporary, path)
        return path

    def search(self, folder: str, queries: np.ndarray, k: int, exclude: list, metric: str, similarity, span):
        meta = (Path(folder) / "meta.json").stat()
        token = (folder, meta.st_mtime_ns, meta.st_size)
        if token not in self.indexes:
            self.indexes = {token: VectorIndex(Path(folder))}
        return self.indexes[token].search(queries, k, exclude, metric, similarity, span)


# Idle workers of a cluster this process did not start (its own ``ray.init``, RAY_ADDRESS), kept for
# the next run by (cluster, resources, threads): a worker's start (torch imported) costs seconds. They
# hold their CPUs / GPUs on that cluster until this process ends or `release_workers` is called.
_IDLE: dict[tuple, list] = {}
_JOINED: dict[str, str] = {}  # how this process joined a cluster through RAY_ADDRESS, by its head: the sidecar's words


def release_workers() -> int:
    """Stop the idle workers this process keeps on a cluster it joined (module comment above), so
    their CPUs and GPUs go back to the cluster's other jobs; the number stopped. The next run starts
    workers again (seconds each)."""
    stopped = 0
    for actors in _IDLE.values():
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # a cluster since left: the actor is gone with it (Ray's errors have no common type)
                pass
            stopped += 1
    _IDLE.clear()
    return stopped


class RayExecutor:
    """Encoding and search on Ray workers (module docstring); the cluster is started or joined on
    first use, and left (stopped when the kit started it) by `close`."""

    name = "ray"

    def __init__(self, workers: int | None = None):
        self.wanted = workers
        self.owned = False
        self.reaper: subprocess.Popen | None = None  # ends a local cluster's processes with this process
        self.cluster: str | None = None
        self.actors: list = []
        self.shape: tuple | None = None
        self.nodes: list[str] = []
        self.shared: bool | None = None
        self.unshared_because = ""  # why the vectors go through the object store (the run's note says it)
        self.threads = 1
        self.notes: list[str] = []
        self.payload = None  # the model's payload in the object store, held while the workers may need it
        self.payload_id: int | None = None
        self.count: int | None = None
        self.head: str | None = None  # the cluster's head (host:port), asked whether it answers after a failure
        self.device: str | None = None  # the device kind the workers encode on, once they said it

    # -- the cluster and the workers ----------------------------------------------------------
    def _connect(self) -> None:
        if self.cluster is not None:
            return
        quiet = {"logging_level": logging.ERROR, "log_to_driver": False}
        os.environ.setdefault(RECONNECT_ENV, RECONNECT_S)
        if ray.is_initialized():  # (joined by an earlier executor of this process: `encoding_device`, a run before)
            self.cluster = _JOINED.get(ray.get_runtime_context().gcs_address, "this process's")
        elif "RAY_ADDRESS" in os.environ:
            address = check_address(os.environ["RAY_ADDRESS"])
            use_token_if_saved()
            try:
                ray.init(address=address, **quiet)
            except Exception as exc:  # Ray's connection errors have no common type
                raise MissingPrerequisite(f"cannot join the Ray cluster at RAY_ADDRESS={address} ({one_line(exc)})",
                                          "check that the head runs there (`ray status`) or unset RAY_ADDRESS "
                                          "for a local cluster") from None
            self.cluster, self.owned = f"joined at {address}", False
            _JOINED[ray.get_runtime_context().gcs_address] = self.cluster
        else:
            cores = os.cpu_count() or 1
            check_count(self.wanted, 0, cores, "a local cluster on this machine")  # before anything starts
            os.environ.setdefault(START_WAIT_ENV, START_WAIT_S)
            for attempt in range(START_ATTEMPTS):  # Ray gives a node 30 s to register: a loaded machine may miss it
                before = children()
                try:
                    # "local": a new cluster, never the one a `ray start` on this machine recorded (Ray joins
                    # the address in its /tmp/ray/ray_current_cluster otherwise, and refuses num_cpus there)
                    ray.init(address="local", num_cpus=cores, include_dashboard=False, **quiet)
                    break
                except Exception as exc:  # a start that timed out: Ray raises a bare Exception
                    ray.shutdown()
                    end(of_ray(children() - before))  # what the failed start left (Ray lost hold of it)
                    if attempt + 1 == START_ATTEMPTS:
                        raise MissingPrerequisite(f"the local Ray cluster did not start in {START_ATTEMPTS} tries "
                                                  f"({one_line(exc)})", "run in this process (executor local), or "
                                                  "again when the machine is less loaded, or start Ray yourself "
                                                  "(`ray start --head`) and set RAY_ADDRESS") from None
            # Ray's agents outlive a killed driver (about 60 s): a reaper ends them with this process
            self.reaper = subprocess.Popen(reaping(of_ray(children() - before)), stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, start_new_session=True)
            self.cluster, self.owned = "local", True
        self.head = ray.get_runtime_context().gcs_address

    def _workers(self, encode) -> list:
        """The workers, holding this model's payload (sent again for another model)."""
        self._connect()
        owner = id(getattr(encode, "__self__", encode))  # a bound method is made anew on each access
        if self.actors and self.payload_id == owner:
            return self.actors
        try:
            self.payload = ray.put(encode)
        except Exception as exc:  # cloudpickle's errors have no common type
            while (exc.__cause__ or exc.__context__) is not None:  # the root (Ray wraps it in a report of pages)
                exc = exc.__cause__ or exc.__context__
            raise RequestError("executor", f"cannot send the model to Ray workers ({one_line(exc)}); run it "
                               "with {executor:local}") from None
        self.payload_id = owner
        if self.actors:
            return self.actors
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), float(resources.get("CPU", 1))
        count = self.wanted or gpus or max(1, int(cpus))
        check_count(count, gpus, cpus, "the cluster")
        share = cpus / count
        self.threads = torch_threads()
        options = {"num_gpus": 1, "num_cpus": 1} if gpus else \
            {"num_cpus": int(share) if share >= 1 else max(0.0001, int(share * 10000) / 10000)}
        if not gpus and count * self.threads > cpus:
            self.notes.append(f"{count} workers of {self.threads} torch threads each (the driver's: CPU kernels "
                              f"round by their thread count, so the vectors are the in-process run's) share "
                              f"{cpus:g} CPUs")
        self.shape = (ray.get_runtime_context().gcs_address, tuple(sorted(options.items())), self.threads)
        for shape in [k for k in _IDLE if k != self.shape]:  # idle workers of another shape free their CPUs
            for actor in _IDLE.pop(shape):
                if shape[0] == self.shape[0]:  # (those of a cluster since left are gone with it)
                    ray.kill(actor)
        idle = _IDLE.get(self.shape, [])
        self.actors = [idle.pop() for _ in range(min(count, len(idle)))]
        self.actors += [Worker.options(max_restarts=RESTARTS, max_task_retries=RESTARTS, **options)
                        .remote(self.threads) for _ in range(count - len(self.actors))]
        self.count = count
        probe = cache_root() / f"ray-probe-{uuid.uuid4().hex}"
        token = uuid.uuid4().hex
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_text(token, encoding="utf-8")
        try:
            found = self._get([a.where.remote(str(probe), token) for a in self.actors])
        finally:
            probe.unlink(missing_ok=True)
        self.nodes = sorted({node for node, _, _ in found})
        self.device = "cuda" if gpus else "cpu"
        for number, (node, _, kind) in enumerate(found):
            if kind != self.device:
                self.discard()
                given, fix = ("one GPU", "install a CUDA build of torch on that node, or leave its GPUs out of "
                              "Ray there (`ray start --num-gpus 0`)") if gpus else \
                    ("no GPU", "give Ray that node's GPUs (`ray start --num-gpus N`), or hide them from its workers "
                     "(CUDA_VISIBLE_DEVICES=)")
                raise MissingPrerequisite(f"Ray worker {number + 1} of {count} on {node.split(': ')[0]} was given "
                                          f"{given} by the cluster but its torch encodes on {kind}", fix)
        forced = os.environ.get(VECTORS_ENV) == "object-store"
        self.shared = all(sees for _, sees, _ in found) and not forced
        self.unshared_because = f"{VECTORS_ENV}=object-store" if forced else "no path every worker sees"
        return self.actors

    def _get(self, refs: list, numbers: list[int] | None = None, resend=None):
        """The results of `refs` (of workers `numbers`). A worker "temporarily unavailable" (its
        node lost, not yet declared dead by Ray) is asked again, by `resend(number)` (a new ref of
        the same work), for up to `UNAVAILABLE_S` seconds, while the cluster's head answers; a head
        that no longer answers is the cluster stopped (`_stopped`)."""
        numbers = numbers if numbers is not None else list(range(len(refs)))
        out = []
        for number, ref in zip(numbers, refs):
            since = None
            while True:
                try:
                    out.append(ray.get(ref))
                    break
                except RayTaskError as exc:
                    self.discard()
                    raise DataError(f"Ray worker {number + 1} of {self.count}", one_line(exc)) from None
                except ActorUnavailableError as exc:
                    if not self._head_answers():
                        raise self._stopped() from None
                    since = since or time.monotonic()
                    if resend is None or time.monotonic() - since > UNAVAILABLE_S:
                        self.discard()
                        raise DataError(f"Ray worker {number + 1} of {self.count}", f"unavailable for "
                                        f"{time.monotonic() - since:.0f} s ({one_line(exc)}); check its node "
                                        "(`ray status`)") from None
                    time.sleep(1)
                    ref = resend(number)
                except RayActorError as exc:
                    if without_kit(exc):
                        self.discard()
                        raise no_kit(exc, f"Ray worker {number + 1} of {self.count}") from None
                    if not self._head_answers():
                        raise self._stopped() from None
                    self.discard()
                    raise DataError(f"Ray worker {number + 1} of {self.count}", f"died and was restarted "
                                    f"{RESTARTS} times ({one_line(exc)}); check the workers' memory and "
                                    "logs") from None
        return out

    def _head_answers(self) -> bool:
        """Whether the cluster's head still accepts a connection (within `PROBE_S`)."""
        host, _, port = (self.head or "").rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S):
                return True
        except (OSError, ValueError):
            return False

    def _stopped(self) -> KitError:
        """The cluster stopped under the run: this process leaves it (Ray would end a process whose
        head stays away: `RECONNECT_ENV`), keeps none of its workers, and says so in one line."""
        head, cluster = self.head, self.cluster
        self.actors, self.payload, self.owned = [], None, False
        for shape in [k for k in _IDLE if k[0] == head]:
            _IDLE.pop(shape)
        ray.shutdown()
        self._end_reaper()
        self.cluster = None
        return MissingPrerequisite(f"the Ray cluster ({cluster}) stopped in the middle of the run: its head at "
                                   f"{head} does not answer", "start it again and run again (the batches already "
                                   "committed are kept), or run in this process (executor local)")

    def encoding_device(self) -> str:
        """The device kind the workers encode on: ``cuda`` where the cluster has GPUs (a worker
        takes one; each checks that its torch sees it), else ``cpu``. A local cluster not yet
        started is this machine's, so nothing is started to know it (`gpu_count`)."""
        if self.device is not None:
            return self.device
        if self.cluster is None and not ray.is_initialized() and "RAY_ADDRESS" not in os.environ:
            return "cuda" if gpu_count() else "cpu"
        self._connect()
        return "cuda" if int(ray.cluster_resources().get("GPU", 0)) else "cpu"

    # -- the executor's two jobs --------------------------------------------------------------
    def encode_batches(self, encode, batches, folder):
        """The vectors of each batch, in order (`evalkit.retrieval.executors`). No input is in two
        batches (`evalkit.retrieval.vector_index.batch_plan`), so batches never wait for each other."""
        actors = self._workers(encode)
        shards = Path(f"{folder}.shards") if self.shared else None
        if shards is not None:
            shards.mkdir(parents=True, exist_ok=True)
        pending: deque = deque()
        batches = iter(batches)
        run = uuid.uuid4().hex[:12]  # this build's files: a killed build's late workers write others
        sent = 0

        def fill() -> None:
            nonlocal sent
            while len(pending) < IN_FLIGHT * len(actors):
                batch = next(batches, None)
                if batch is None:
                    return
                number = sent % len(actors)
                path = None if shards is None else str(shards / f"{run}-{sent:09d}.npy")
                pending.append((batch, number, path, actors[number].encode.remote([self.payload], batch, path)))
                sent += 1

        fill()
        while pending:
            batch, number, path, ref = pending.popleft()
            again = lambda n, b=batch, p=path: actors[n].encode.remote([self.payload], b, p)  # noqa: E731
            found = self._get([ref], [number], again)[0]
            yield batch, np.load(found) if path is not None else found
            if path is not None:
                Path(path).unlink(missing_ok=True)
            fill()
        if shards is not None:
            for left in shards.glob("*.npy"):  # a killed driver's batches, committed by now
                left.unlink(missing_ok=True)
            shards.rmdir()

    def search(self, index, queries: np.ndarray, k: int, exclude, metric: str, similarity) -> list[dict[str, float]]:
        parts = spans(len(index.ids), SEARCH_ROWS)
        exclude = list(exclude)
        if self.actors and self.shared:
            scoring = ray.put(similarity)
            refs = [self.actors[i % len(self.actors)].search.remote(str(index.folder), queries, k, exclude, metric,
                                                                    scoring, span)
                    for i, span in enumerate(parts)]
            tops = self._get(refs, [i % len(self.actors) for i in range(len(parts))])
        else:  # no worker sees the index (or none was started: the index was already built)
            tops = [index.search(queries, k, exclude, metric, similarity, span) for span in parts]
        return merge_top(tops, k)

    def describe(self) -> dict:
        vectors = None if self.shared is None else "shared path" if self.shared else "object store"
        notes = list(self.notes)
        if vectors is not None:
            where = "cache folder (a path every worker sees)" if self.shared else \
                f"Ray object store ({self.unshared_because})"
            notes.append(f"document vectors came back through the {where}")
        else:
            notes.append("no document was encoded on the cluster (the index was complete)")
        return {"executor": self.name, "workers": self.count or self.wanted, "cluster": self.cluster,
                "nodes": self.nodes, "device": self.device, "vectors": vectors, "notes": notes}

    def close(self) -> None:
        """Leave the cluster: stopped when the kit started it; else the workers kept idle for the
        next run of this process (a worker that failed is not kept)."""
        if self.cluster is None:
            return
        if self.owned:
            ray.shutdown()
            self._end_reaper()
        elif self.actors and ray.is_initialized():
            _IDLE.setdefault(self.shape, []).extend(self.actors)
        self.actors, self.payload, self.owned = [], None, False

    def _end_reaper(self) -> None:
        """The local cluster's reaper ends what Ray's shutdown left of it, and exits."""
        if self.reaper is not None:
            self.reaper.terminate()
            self.reaper.wait()
            self.reaper = None

    def discard(self) -> None:
        """Stop this executor's workers (after a failure: none is kept idle)."""
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # a cluster since left or stopped: the actor is gone with it (no common type)
                pass
        self.actors = []

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is not None:  # a failed or interrupted run keeps no worker (one may be mid-batch)
            self.discard()
        self.close()
