"""A run's settings (`RunSettings`, built by keyword): the fields are the run-store key's settings
and name the run's folder (`run_name`), except where the run is executed (`EXECUTION_FIELDS`:
in-process or on a Ray cluster, and with how many workers), which changes the time, never the
numbers, so it is recorded in the sidecar but keys nothing (`check_execution`, the one rule of
every front end). The registry entries a run reads are looked up once, when the runner binds the
run (`evalkit.pipeline.runner.bind`).

`RunRequest` is how a user asks for a model's runs (``evalkit run``'s options, `evalkit.api.evaluate`'s
``run=`` or keywords), beside the evaluation request (`evalkit.evaluation.request`): a declared
schema (pydantic, `evalkit.core.schema`), each setting once with its rule, checked as it is built;
`check_run_request` checks every setting (the defaults too) before anything is loaded, and `bind`
applies the same rules (`check_stage`, `check_execution`, `check_index_dtype`: the schema's) to
every run any front end makes, so a setting one front end refuses no other stores."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, SkipValidation, ValidationInfo, field_validator

from evalkit.core.errors import DataError, RequestError
from evalkit.core.hashing import file_sha256, files_sha256
from evalkit.core.names import run_part
from evalkit.core.schema import Problem, RequestSchema
from evalkit.core.workers import check_workers
from evalkit.data.collection import BASE
from evalkit.data.protocols import DEFAULT_PROTOCOL, POOL_PROTOCOLS
from evalkit.evaluation.request import Cutoff, ProtocolName
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


INSTRUCTIONS_FIX = "give a YAML file shaped as evalkit/config/instructions.yaml"  # a user's instruction file
EXECUTORS = ("local", "ray")  # in-process; a Ray cluster (evalkit.retrieval.ray_executor)
EXECUTION_FIELDS = ("executor", "workers")  # how a run is executed: in the sidecar, not in its key


def check_execution(executor, workers) -> None:
    """The one rule for where a run executes (every front end's, and `bind`'s): `RunRequest`'s
    ``executor`` and ``workers``."""
    RunRequest(executor=executor, workers=workers)


def check_stage(protocol: str, first_stage: str | None, depth: object) -> int | None:
    """The one rule of the first stage, for every front end and every bound run (`RunRequest`'s
    ``protocol``, ``first_stage`` and ``depth``); the depth as checked."""
    return RunRequest(protocol=protocol, first_stage=first_stage, depth=depth).depth


def check_index_dtype(value: object) -> str:
    """The whole-corpus vector index's dtype under `RunRequest`'s rule, for every bound run."""
    return RunRequest(index_dtype=value).index_dtype


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


def user_file(field: str, fix: str) -> BeforeValidator:
    """The rule of a field naming a user's file: None, or an existing file, given back as its path
    (a string); anything else is refused with `fix`."""
    def rule(value: object) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str | Path) or not Path(value).expanduser().is_file():
            raise RequestError(field, f"no such file; {fix}", value=str(value))
        return str(Path(value).expanduser())
    return BeforeValidator(rule)


class RunRequest(RequestSchema):
    """How a model's runs are to be made, as a user asks for it, each field checked by its rule as
    it is built (`check_run_request` checks every field, defaults included): the registry
    ``profile``, the ``protocol`` (its first stage: ``first_stage`` and ``depth``, under the pooled
    and full protocols only; the full protocol's ``corpus`` file), the instruction ``variants``
    (one name or a list; None: ``base``, or every variant of the user's ``instructions`` file;
    checked against the collection: `evalkit.data.collection.select_variants`), a ``prompt``
    appended to every query, the whole-corpus index's ``index_dtype``, where it executes
    (``executor``; ``workers`` for Ray only) and the run store's folder (``runs_dir``). Which
    queries are ranked is the evaluation request's (``seeds``, ``queries``)."""

    ORDER: ClassVar[tuple[str, ...]] = ("protocol", "depth", "first_stage", "corpus", "prompt", "index_dtype",
                                        "executor", "workers", "profile", "runs_dir", "instructions", "variants")

    profile: str = "offline"
    protocol: ProtocolName = DEFAULT_PROTOCOL
    variants: SkipValidation[str | Sequence[str] | None] = None
    instructions: Annotated[str | None, user_file("instructions", INSTRUCTIONS_FIX)] = None
    prompt: str | None = None
    first_stage: str | None = None
    depth: Cutoff = None
    corpus: Annotated[str | None, user_file("corpus", "give the full protocol's corpus file (CSFCube: "
                                            "abstracts-preds.zip, figshare 14796339)")] = None
    index_dtype: Annotated[Literal[DTYPES], Problem(f"is not one of {', '.join(DTYPES)}")] = "float32"
    executor: Annotated[Literal[EXECUTORS], Problem(f"is not one of {', '.join(EXECUTORS)}")] = "local"
    workers: int | None = None
    runs_dir: Annotated[Path, BeforeValidator(check_runs_dir)] = Path("runs")

    @field_validator("first_stage", "depth")
    @classmethod
    def _first_stage(cls, value: object, info: ValidationInfo) -> object:
        """A depth or first stage under the pool protocols would be stored in the run's key yet rank nothing
        differently (they rank each query's given candidates)."""
        protocol = info.data.get("protocol")
        if protocol in POOL_PROTOCOLS and (value is not None if info.field_name == "depth" else value):
            raise RequestError("protocol", f"{{{info.field_name}}} applies to the pooled and full protocols; add "
                               "{protocol:pooled} or drop it", value=protocol)
        return value

    @field_validator("corpus", mode="before")
    @classmethod
    def _corpus(cls, value: object, info: ValidationInfo) -> object:
        """Under the full protocol only (before its file's rule, `user_file`)."""
        if value is not None and info.data.get("protocol") != "full":
            raise RequestError("corpus", "applies to {protocol:full}; add it or drop {corpus}")
        return value

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: object) -> object:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise RequestError("prompt", "is empty; give the prompt text or drop {prompt}")
        return value

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: object, info: ValidationInfo) -> int | None:
        workers = check_workers(value)
        if workers is not None and info.data.get("executor", "ray") != "ray":
            raise RequestError("workers", "applies to the Ray executor; add {executor:ray} or drop it", value=value)
        return workers

    @field_validator("profile", mode="before")
    @classmethod
    def _profile(cls, value: object) -> object:
        if value not in registry.profiles():
            raise RequestError("profile", f"unknown profile {value!r}; choose one of "
                               f"{', '.join(registry.profiles())}", value=value)
        return value


RUN_FIELDS = tuple(RunRequest.model_fields)


def check_run_request(request: RunRequest) -> RunRequest:
    """`request` with every setting checked by its one rule (every front end's; `bind` applies the
    stage, dtype and execution rules again to every run), the defaults too, before anything is
    loaded. The variants are checked against the collection (`evalkit.data.collection.select_variants`)."""
    if not isinstance(request, RunRequest):
        raise RequestError("run", f"a {type(request).__name__} is not a run request; give an evalkit RunRequest")
    return request.checked()


def instructions_identity(path: str) -> dict:
    """How sidecars and tables name an instruction file: its file name and sha256."""
    try:
        return {"file": Path(path).name, "sha256": file_sha256(Path(path))}
    except OSError as exc:
        raise DataError(f"instructions {path}",
                        f"cannot read the file ({exc.strerror or exc}); {INSTRUCTIONS_FIX}") from None


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
