"""Where the kit keeps its outputs, runs and caches: one place for the CLI, make, the Python API
and notebooks started from JupyterLab or nbconvert.

When the kit runs from a checkout (an editable install: a folder holding ``evalkit/``,
``notebooks/`` and the ``Makefile``), relative output folders resolve against that checkout
and the cache is its ``cache/``, whatever the current folder is (a notebook's kernel starts in
``notebooks/``). An installed kit resolves relative folders against the current folder and
caches under ``~/.cache/evalkit``. ``EVALKIT_CACHE`` overrides the cache everywhere; `cache_env`
is its one reader (a path that exists and is not a folder is one line).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from evalkit.core.errors import DataError


@cache
def checkout() -> Path | None:
    """The checkout the kit runs from, or None for an installed kit."""
    root = Path(__file__).resolve().parents[2]
    markers = (root / "evalkit").is_dir() and (root / "notebooks").is_dir() and (root / "Makefile").is_file()
    return root if markers else None


def resolve(folder: str | Path) -> Path:
    """`folder` as given when absolute, else under the checkout (or the current folder)."""
    path = Path(folder)
    if path.is_absolute():
        return path
    return (checkout() or Path.cwd()) / path


CACHE_ENV = "EVALKIT_CACHE"


def cache_env() -> Path | None:
    """``$EVALKIT_CACHE`` (None when unset or empty): the variable's one reader. A path that exists
    and is not a folder (``/dev/null``, a file) is refused in one line; a missing one is made later."""
    value = os.environ.get(CACHE_ENV, "")
    if not value:
        return None
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise DataError(f"{CACHE_ENV}={value}",
                        "is not a directory; point it at a folder (made if missing) or unset it")
    return path


def cache_root() -> Path:
    """Run and embedding caches: ``$EVALKIT_CACHE``, else the checkout's ``cache/``, else ``~/.cache/evalkit``."""
    given = cache_env()
    if given is not None:
        return given
    root = checkout()
    return root / "cache" if root is not None else Path.home() / ".cache" / "evalkit"
