"""A run's settings (`RunSettings`, built by keyword): the fields are the run-store key's settings
and name the run's folder (`run_name`), except where the run is executed (`EXECUTION_FIELDS`:
in-process or on a Ray cluster, and with how many workers), which changes the time, never the
numbers, so it is recorded in the sidecar but keys nothing (`check_execution`, the one rule of
every front end). The registry entries a run reads are looked up once, when the runner binds the
run (`evalkit.pipeline.runner.bind`).

`RunRequest` is how a user asks for a model's runs (``evalkit run``'s options, `evalkit.api.evaluate`'s
``run=`` or keywords), beside the evaluation request (`evalkit.evaluation.request`); `check_run_request`
checks each of its settings by one rule, before anything is loaded, and `bind` applies the same rules
(`check_stage`, `check_execution`, `check_index_dtype`) to every run any front end makes, so a setting
one front end refuses no other stores."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

from evalkit.core.errors import DataError, RequestError
from evalkit.core.hashing import file_sha256, files_sha256
from evalkit.core.names import run_part
from evalkit.core.workers import check_workers
from evalkit.data.collection import BASE
from evalkit.data.protocols import DEFAULT_PROTOCOL, POOL_PROTOCOLS, check_protocol
from evalkit.evaluation.request import check_cutoff
from evalkit.models import adhoc, registry
from evalkit.retrieval.corpus import DTYPES


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What a run is made of, built by keyword (``RunSettings(model="bm25", protocol="pooled")``): every
    field but `EXECUTION_FIELDS` is in the run-store key (`sidecar_key`), the model, variant, index dtype, instruction
    file and prompt in the run's folder name (`run_name`). The registry entries a run reads are
    looked up once, when the run is bound (`evalkit.pipeline.runner.bind`)."""

    model: str
    dataset: str = "csfcube"
    profile: str = "offline"
    protocol: str = "pool"
    variant: str = BASE
    prompt: str | None = None  # a generic prompt appended to every query text (Promptriever)
    first_stage: str | None = None  # pooled and full protocols; default: the profile's
    depth: int | None = None  # pooled and full protocols; default: the profile's
    queries: tuple[str, ...] | None = None  # smoke runs: only these query ids
    corpus: str | None = None  # full protocol: abstracts-preds.zip (or a .jsonl in its format)
    instructions: str | None = None  # a user's instruction file (its variants replace the collection's)
    index_dtype: str = "float32"  # whole-corpus vector index: float32, or float16 (half the disk)
    executor: str = "local"  # where a whole corpus is encoded and searched: in-process, or "ray" (a cluster)
    workers: int | None = None  # Ray workers; default one per GPU of the cluster, else one per core

    @property
    def run_name(self) -> str:
        """The run's name (the TREC tag and the folder name): parts joined by ``--``, the model's, the
        variant's (not base), ``index-DTYPE`` (not float32), ``instructions-HASH`` and ``prompt-HASH``.
        The model's and the variant's parts are `evalkit.core.names.run_part`s: never holding ``--``,
        the variant's never starting as the parts after it do, so two runs never share a name (a model
        named ``bm25--generic`` is not bm25's generic variant)."""
        parts = [adhoc.run_name_of(self.model)]
        if self.variant != BASE:
            parts.append(run_part(self.variant, reserved=SUFFIXES))
        if self.index_dtype != "float32":
            parts.append(f"index-{self.index_dtype}")
        if self.instructions is not None:
            parts.append(f"instructions-{instructions_identity(self.instructions)['sha256'][:10]}")
        if self.prompt is not None:
            parts.append(f"prompt-{_digest(self.prompt)}")
        return "--".join(parts)


SUFFIXES = ("index-", "instructions-", "prompt-")  # the run name's parts after the variant's


EXECUTORS = ("local", "ray")  # in-process; a Ray cluster (evalkit.retrieval.ray_executor)
EXECUTION_FIELDS = ("executor", "workers")  # how a run is executed: in the sidecar, not in its key


def check_execution(executor, workers) -> None:
    """The one rule for where a run executes (every front end's): a known executor, and a worker
    count (a positive integer) only for Ray."""
    if executor not in EXECUTORS:
        raise RequestError("executor", f"is not one of {', '.join(EXECUTORS)}", value=executor)
    if check_workers(workers) is not None and executor != "ray":
        raise RequestError("workers", "applies to the Ray executor; add {executor:ray} or drop it", value=workers)


def check_stage(protocol: str, first_stage: str | None, depth: object) -> int | None:
    """The one rule of the first stage, for every front end and every bound run: `depth` a positive
    whole number, and `first_stage` and `depth` only under the pooled and full protocols (the pool
    protocols rank each query's given candidates: a depth there would be stored in the run's key
    yet rank nothing differently). The depth as checked."""
    check_protocol(protocol)
    depth = check_cutoff("depth", depth)
    if protocol in POOL_PROTOCOLS and (depth is not None or first_stage):
        given = "depth" if depth is not None else "first_stage"
        raise RequestError("protocol", f"{{{given}}} applies to the pooled and full protocols; add "
                           "{protocol:pooled} or drop it", value=protocol)
    return depth


def check_index_dtype(value: object) -> str:
    """The whole-corpus vector index's dtype (`evalkit.retrieval.corpus.DTYPES`)."""
    if value not in DTYPES:
        raise RequestError("index_dtype", f"is not one of {', '.join(DTYPES)}", value=value)
    return value


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """How a model's runs are to be made, as a user asks for it (unchecked: `check_run_request`):
    the registry ``profile``, the ``protocol`` (its first stage: ``first_stage`` and ``depth``, the
    full protocol's ``corpus`` file), the instruction ``variants`` (one name or a list; None:
    ``base``, or every variant of the user's ``instructions`` file), a ``prompt`` appended to every
    query, the whole-corpus index's ``index_dtype``, where it executes (``executor``, ``workers``)
    and the run store's folder (``runs_dir``). Which queries are ranked is the evaluation
    request's (``seeds``, ``queries``)."""

    profile: str = "offline"
    protocol: str = DEFAULT_PROTOCOL
    variants: str | Sequence[str] | None = None
    instructions: str | Path | None = None
    prompt: str | None = None
    first_stage: str | None = None
    depth: int | None = None
    corpus: str | Path | None = None
    index_dtype: str = "float32"
    executor: str = "local"
    workers: int | None = None
    runs_dir: str | Path = "runs"


RUN_FIELDS = tuple(f.name for f in fields(RunRequest))


def check_runs_dir(runs_dir: object) -> Path:
    """The run store's folder: a folder, or one that can be made under a folder this user may write."""
    if not isinstance(runs_dir, str | Path) or not str(runs_dir).strip():
        raise RequestError("runs_dir", "give the folder of the run store", value=runs_dir)
    path = Path(runs_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise RequestError("runs_dir", f"is not a folder{' (it is a file)' if path.is_file() else ''}; give the "
                           "folder of the run store (made if missing)", value=str(runs_dir))
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise RequestError("runs_dir", f"{probe} is a file, so the folder cannot be made; give another folder",
                           value=str(runs_dir))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RequestError("runs_dir", f"{probe} is not writable; give a folder you can write", value=str(runs_dir))
    return path


def check_instructions(instructions: object) -> str | None:
    """A user's instruction file: an existing file (its path as a string), or None."""
    if instructions is None:
        return None
    if not isinstance(instructions, str | Path) or not Path(instructions).expanduser().is_file():
        raise RequestError("instructions", "no such file; give a YAML file shaped as evalkit/config/instructions.yaml",
                           value=str(instructions))
    return str(Path(instructions).expanduser())


def check_run_request(request: RunRequest) -> RunRequest:
    """`request` with each setting checked by its one rule (every front end's; `bind` applies the
    stage, dtype and execution rules again to every run), before anything is loaded: the protocol
    and its first stage (`check_stage`), the corpus (the full protocol's only, an existing file),
    the prompt, the index dtype, the executor, the profile, the run store's folder and the
    instruction file. The variants are checked against the collection (`evalkit.data.collection.select_variants`)."""
    if not isinstance(request, RunRequest):
        raise RequestError("run", f"a {type(request).__name__} is not a run request; give an evalkit RunRequest")
    depth = check_stage(request.protocol, request.first_stage, request.depth)
    if request.corpus is not None:
        if request.protocol != "full":
            raise RequestError("corpus", "applies to {protocol:full}; add it or drop {corpus}")
        if not isinstance(request.corpus, str | Path) or not Path(request.corpus).expanduser().is_file():
            raise RequestError("corpus", "no such file; give the full protocol's corpus file (CSFCube: "
                               "abstracts-preds.zip, figshare 14796339)", value=str(request.corpus))
    if request.prompt is not None and (not isinstance(request.prompt, str) or not request.prompt.strip()):
        raise RequestError("prompt", "is empty; give the prompt text or drop {prompt}")
    check_index_dtype(request.index_dtype)
    check_execution(request.executor, request.workers)
    if request.profile not in registry.profiles():
        raise RequestError("profile", f"unknown profile {request.profile!r}; choose one of "
                           f"{', '.join(registry.profiles())}", value=request.profile)
    return replace(request, depth=depth, runs_dir=check_runs_dir(request.runs_dir),
                   instructions=check_instructions(request.instructions),
                   corpus=None if request.corpus is None else str(Path(request.corpus).expanduser()))


def instructions_identity(path: str) -> dict:
    """How sidecars and tables name an instruction file: its file name and sha256."""
    try:
        return {"file": Path(path).name, "sha256": file_sha256(Path(path))}
    except OSError as exc:
        raise DataError(f"instructions {path}", f"cannot read the file ({exc.strerror or exc}); give a YAML file "
                        "shaped as evalkit/config/instructions.yaml") from None


def corpus_identity(path: str) -> dict:
    """How a run's key names the full protocol's corpus file: its file name and sha256 (the digest
    the corpus index is keyed by, `evalkit.retrieval.corpus.Corpus.of_file`), never its path."""
    if not Path(path).is_file():  # Corpus.of_file's words, said when the run is bound
        raise DataError(Path(path), "corpus file not found; check {corpus}")
    try:
        return {"file": Path(path).name, "sha256": files_sha256([Path(path)])}
    except OSError as exc:
        raise DataError(Path(path), f"cannot read the corpus file ({exc.strerror or exc}); check {{corpus}}") from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]
