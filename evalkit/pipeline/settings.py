"""A run's settings (`RunSettings`, built by keyword): the fields are the run-store key's settings
and name the run's folder (`run_name`), except where the run is executed (`EXECUTION_FIELDS`:
in-process or on a Ray cluster, and with how many workers), which changes the time, never the
numbers, so it is recorded in the sidecar but keys nothing (`check_execution`, the one rule of
every front end). The registry entries a run reads are looked up once, when the runner binds the
run (`evalkit.pipeline.runner.bind`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evalkit.core.errors import DataError, RequestError
from evalkit.core.hashing import file_sha256, files_sha256
from evalkit.core.names import run_part
from evalkit.core.workers import check_workers
from evalkit.data.collection import BASE
from evalkit.models import adhoc


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
