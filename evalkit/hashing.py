"""Streaming sha256 of files, for checksums, revisions and cache keys."""

from __future__ import annotations

import hashlib
from pathlib import Path


def update_with_file(digest, path: Path) -> None:
    """Feed a file's bytes to `digest` in 1 MiB blocks."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    update_with_file(digest, Path(path))
    return digest.hexdigest()
