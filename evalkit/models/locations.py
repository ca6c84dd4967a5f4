"""Where a model's files are: a registry entry's ``model`` (and ``base``, ``adapter``) locations
resolved to a folder on this machine, or kept as a hub id."""

from __future__ import annotations

from pathlib import Path

from evalkit.core.errors import DataError, KitError
from evalkit.core.packages import extract_split_zip, package_file


def resolve_location(location: str) -> str:
    """Where a model's files are.

    - ``pypi:PACKAGE``: the folder inside the installed package holding modules.json;
    - ``pypi-split:PREFIX``: a zip split over packages PREFIX-001, PREFIX-002, ... (files
      ``*.zip.NNN``), joined and extracted once into the cache (`evalkit.core.packages`);
    - anything else (a hub id or a local folder) as given.
    """
    if location.startswith("pypi-split:"):
        return str(model_folder(extract_split_zip(location.removeprefix("pypi-split:"))))
    if location.startswith("pypi:"):
        return str(package_file(location.removeprefix("pypi:"), "modules.json").parent)
    return location


def model_folder(root: Path) -> Path:
    """The sentence-transformers folder (holding modules.json) under an extracted archive."""
    found = sorted(root.rglob("modules.json"))
    if not found:
        raise DataError(root, "holds no sentence-transformers folder (modules.json)")
    return found[0].parent


def local_folder(location: str) -> Path | None:
    """The folder holding a model's files when they are on this machine (a folder, ``pypi:``,
    ``pypi-split:``), else None (a hub id, pinned by the entry's revision)."""
    if location.startswith(("pypi:", "pypi-split:")):
        try:
            return Path(resolve_location(location))
        except KitError:  # not installed: the prerequisite check names it; nothing to pin yet
            return None
    folder = Path(location).expanduser()
    return folder if ":" not in location and folder.is_dir() else None
