"""Streaming sha256 of files, for checksums, revisions and cache keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
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


def files_sha256(paths: Sequence[Path], names: Sequence[str] | None = None) -> str:
    """sha256 over the files' bytes in order, each preceded by its name when `names` are given.

    Model weights and corpora are large and a study builds the same model many times: the digest
    is computed once per process for files whose path, inode, size, modification time and status
    change time are all unchanged. Writing a file changes its status change time (ctime), which no
    user call can set back, so a file edited in place, even to the same size with its modification
    time restored (``touch -d``), is read again. The limit (docs/reference/runs-and-caches.md): on a
    file system whose ctime does not change on a write (some network and FUSE mounts), such an edit
    goes unseen until the process ends.
    """
    entries = []
    for i, path in enumerate(paths):
        stat = Path(path).stat()
        entries.append((str(path), names[i] if names else None,
                        (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)))
    return _digest(tuple(entries))


@cache
def _digest(entries: tuple[tuple[str, str | None, tuple[int, int, int, int]], ...]) -> str:
    digest = hashlib.sha256()
    for path, name, _ in entries:
        if name is not None:
            digest.update(name.encode())
        update_with_file(digest, Path(path))
    return digest.hexdigest()


def folder_revision(folder: Path) -> str:
    """Content hash of a local model folder (file names and bytes)."""
    paths = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    return files_sha256(paths, [str(p.relative_to(folder)) for p in paths])[:16]


def fingerprint(settings: dict) -> str:
    """16 hex digits of sha256 over the settings (JSON, sorted keys) that change a vector."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
