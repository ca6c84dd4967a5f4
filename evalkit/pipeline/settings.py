"""A run's settings (`RunSettings`, built by keyword) and the registry entries one run reads,
resolved once per run (`Resolved`, `resolve`): the model's and, on the pooled and full protocols,
the first stage's. The runner (`evalkit.pipeline.runner`) takes either and resolves once at each
entry point; the fields are the run-store key's settings and name the run's folder (`run_name`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from evalkit.core.errors import KitError
from evalkit.core.hashing import file_sha256
from evalkit.data.collection import BASE
from evalkit.data.protocols import POOL_PROTOCOLS
from evalkit.models import adhoc, registry
from evalkit.models.registry import ModelSpec


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What a run is made of, built by keyword (``RunSettings(model="bm25", protocol="pooled")``): every
    field is in the run-store key (`sidecar_key`), the model, variant, index dtype, instruction
    file and prompt in the run's folder name (`run_name`). The registry entries a run reads are
    looked up once per run, by `Resolved`."""

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

    @property
    def run_name(self) -> str:
        model = adhoc.run_name_of(self.model)
        name = model if self.variant == BASE else f"{model}--{self.variant}"
        name = name if self.index_dtype == "float32" else f"{name}--index-{self.index_dtype}"
        if self.instructions is not None:
            name = f"{name}--instructions-{instructions_identity(self.instructions)['sha256'][:10]}"
        return name if self.prompt is None else f"{name}--prompt-{_digest(self.prompt)}"


@dataclass(frozen=True)
class Resolved:
    """One run's settings with the registry entries it reads, each looked up once, on first use
    (`model_spec`, `first_stage_name`, `first_stage_spec`, `first_stage_depth`). Every entry point
    of the runner (`ensure_stored`, `run_or_reason`, `execute`, ...) resolves its settings once
    (`resolve`) and passes this down, so every step of one run reads the same entries; the
    settings' own fields and `run_name` read through (``resolved.protocol``). A later run
    resolves afresh (a registry edited between runs is seen)."""

    settings: RunSettings

    def __getattr__(self, name: str):
        if name == "settings":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.settings, name)

    @cached_property
    def model_spec(self) -> ModelSpec:
        """The model's registry entry (`registry.spec`; a one-line error for an unknown model)."""
        return registry.spec(self.settings.model, self.settings.profile)

    @cached_property
    def first_stage_name(self) -> str | None:
        """pooled and full: the first-stage model, ``first_stage`` or the profile's; None on the
        pool protocols, which rank each query's given candidates."""
        if self.settings.protocol in POOL_PROTOCOLS:
            return None
        return self.settings.first_stage or registry.profile_value(self.settings.profile, "first_stage")

    @cached_property
    def first_stage_spec(self) -> ModelSpec | None:
        """pooled and full: the first-stage model's registry entry; None on the pool protocols."""
        return None if self.first_stage_name is None else registry.spec(self.first_stage_name, self.settings.profile)

    @cached_property
    def first_stage_depth(self) -> int | None:
        """pooled and full: the documents the first stage keeps per query, ``depth`` or the profile's."""
        if self.settings.protocol in POOL_PROTOCOLS:
            return None
        return self.settings.depth or registry.profile_value(self.settings.profile, "depth")


Settings = RunSettings | Resolved  # what the runner's functions take: a run's settings, or them resolved


def resolve(settings: Settings) -> Resolved:
    """The run's `Resolved` settings (a `Resolved` as it is: resolving twice looks nothing up again)."""
    return settings if isinstance(settings, Resolved) else Resolved(settings)


def instructions_identity(path: str) -> dict:
    """How sidecars and tables name an instruction file: its file name and sha256."""
    try:
        return {"file": Path(path).name, "sha256": file_sha256(Path(path))}
    except OSError as exc:
        raise KitError(f"instructions {path}: cannot read the file ({exc.strerror or exc}); give a YAML file "
                       "shaped as evalkit/config/instructions.yaml") from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]
