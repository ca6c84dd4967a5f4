"""The verified run store: one folder per run, written whole or not at all, reused only when
complete and matching.

Layout: ``RUNS/PROFILE/DATASET/PROTOCOL/RUN_NAME/`` (smoke runs over a subset of the queries
get ``RUN_NAME@subset-HASH``, so they never stand in for full runs), holding

- ``run.trec``: every query's ranking, full-precision scores, the kit's tie rule;
- ``sidecar.json``: what the run is (settings, the model's whole registry entry, its
  described settings, instructions, protocol, data checksum, kit version) and, for each
  ranking file, its sha256 and query count;
- ``accounting.json`` (LLM rerankers): comparisons, prompts, tokens, cache hits, wall time
  of this execution; it varies between executions, so it is kept out of the sidecar.

The folder is written into a temporary sibling and renamed into place, so a reader sees a
complete run or none. `load_verified` returns a run only when the sidecar parses, matches
the expected key, and every listed file has its recorded sha256 and query count; anything
else counts as absent and the run is made again. Files and sidecars are deterministic: the
same run twice gives byte-identical files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.errors import KitError
from evalkit.runs import Run, parse_trec, write_trec

RANKING = "run.trec"
SIDECAR = "sidecar.json"
ACCOUNTING = "accounting.json"


# A run name is the TREC tag column and the folder name: one field, no path separators.
_RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@,:-]*")


def check_run_name(name: str) -> str:
    """`name` when it survives a TREC file (one whitespace-free field) and a folder name, else KitError."""
    if not isinstance(name, str) or not _RUN_NAME.fullmatch(name):
        raise KitError(f"run name {name!r} cannot round-trip through a TREC file and a folder name; "
                       "name the model with letters, digits and . _ - + = @ , : only")
    return name


def run_folder(runs_dir: Path, settings: Any, dataset: str) -> Path:
    """Where the run of `settings` (a `RunSettings`) lives; the run name is checked first."""
    name = check_run_name(settings.run_name)
    if settings.queries is not None:
        subset = hashlib.sha256("\n".join(sorted(settings.queries)).encode()).hexdigest()[:10]
        name = f"{name}@subset-{subset}"
    return Path(runs_dir) / settings.profile / _slug(dataset) / settings.protocol / name


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_ids(run: Run) -> None:
    for qid, docs in run.items():
        bad = next((i for i in (qid, *docs) if not isinstance(i, str) or not i or len(i.split()) != 1), None)
        if bad is not None:
            raise KitError(f"id {bad!r} (query {qid}) cannot round-trip through a TREC file; ids must be "
                           "non-empty and without whitespace")


@contextlib.contextmanager
def _locked(parent: Path) -> Iterator[None]:
    """An exclusive lock on the run folder's parent while folders are swapped (concurrent writers)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the rename alone
        yield
        return
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_run(folder: Path, run: Run, sidecar: dict, accounting: dict | None = None) -> Path:
    """Write the run folder atomically (temporary sibling, then rename); returns the folder.

    Concurrent writers of one folder each write their own staging folder; the swap into
    place happens under a lock, so the folder ends as one writer's complete run, never a mix."""
    folder = Path(folder)
    check_run_name(sidecar["run"])
    _check_ids(run)
    try:
        return _write_run(folder, run, sidecar, accounting)
    except OSError as exc:  # a full disk, a read-only folder: name the run folder (one error line)
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(folder)) from exc
        raise


def _write_run(folder: Path, run: Run, sidecar: dict, accounting: dict | None) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write_trec(staging / RANKING, run, sidecar["run"])
        files = {RANKING: {"sha256": _sha256(staging / RANKING), "queries": len(run)}}
        if accounting is not None:
            (staging / ACCOUNTING).write_text(json.dumps(accounting, indent=1, sort_keys=True) + "\n")
        (staging / SIDECAR).write_text(json.dumps({**sidecar, "files": files}, indent=1, sort_keys=True) + "\n")
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        with _locked(folder.parent):
            if folder.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
                os.replace(folder, old / "run")
                try:
                    os.replace(staging, folder)
                except OSError:
                    os.replace(old / "run", folder)  # keep the previous complete run
                    raise
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def read_sidecar(folder: Path) -> dict | None:
    """The sidecar of a run folder, or None when it is missing or unreadable."""
    try:
        sidecar = json.loads((Path(folder) / SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, truncated, not UTF-8, absurdly nested
        return None
    return sidecar if isinstance(sidecar, dict) else None


def load_verified(folder: Path, expected: dict) -> Run | None:
    """The stored run when it is complete and matches `expected` (every key equal), else None."""
    sidecar = read_sidecar(folder)
    if sidecar is None or any(sidecar.get(k) != json.loads(json.dumps(v)) for k, v in expected.items()):
        return None
    files = sidecar.get("files")
    if not isinstance(files, dict) or RANKING not in files:
        return None
    # Each file is read once and verified on the bytes read, so a folder swapped by another
    # writer meanwhile gives a mismatch (None), never a mix of two runs or an error.
    try:
        contents = {name: (Path(folder) / name).read_bytes() for name in files}
    except OSError:
        return None
    for name, recorded in files.items():
        if not isinstance(recorded, dict) or hashlib.sha256(contents[name]).hexdigest() != recorded.get("sha256"):
            return None
    try:
        run = parse_trec(contents[RANKING], Path(folder) / RANKING)
    except KitError:
        return None
    return run if len(run) == files[RANKING].get("queries") else None
