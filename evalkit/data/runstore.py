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
complete run or none. `load_verified` (and `is_verified`, by the same check) takes a run only
when the sidecar parses, matches the expected key, every listed file is a regular file of the
folder with its recorded sha256, and the ranking passes `check_run`, the rule `write_run`
applies before writing (so nothing is written that would be refused when read); anything else
counts as absent and the run is made again. Files and sidecars are deterministic: the
same run twice gives byte-identical files.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from evalkit.core import configfile
from evalkit.core.errors import DataError, KitError
from evalkit.core.locks import exclusive, lock_file
from evalkit.core.names import LIMIT, name_part
from evalkit.data.runs import BLOCK, Run, TrecFault, TrecReader, is_finite_score, write_trec

RANKING = "run.trec"
SIDECAR = "sidecar.json"
ACCOUNTING = "accounting.json"


# A run name is the TREC tag column and the folder name: one field, no path separators. Every
# other part of a run folder's path (profile, dataset, protocol) passes the same check, so no
# name a user gives can lead outside the run store.
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+=@,:-]*")


def _too_long(text: str) -> str | None:
    return f"is {len(text)} characters; the run store takes at most {LIMIT} in one folder name" \
        if len(text) > LIMIT else None


def check_path_part(kind: str, text: str) -> str:
    """`text` when it is one plain folder name (no separator, not `.` or `..`, at most
    `evalkit.core.names.LIMIT` characters), else KitError."""
    if not isinstance(text, str) or not _PATH_PART.fullmatch(text):
        raise DataError(kind, f"{text!r} cannot be a folder name in the run store; use letters, digits and "
                        ". _ - + = @ , : only, starting with a letter, digit or _")
    if _too_long(text):
        raise DataError(kind, f"{text[:40]!r}... {_too_long(text)}: give a shorter name")
    return text


def is_storable(text: object) -> bool:
    """Whether `text` can be one field of a TREC file and one folder name (`check_run_name`'s characters)."""
    return isinstance(text, str) and _PATH_PART.fullmatch(text) is not None


def check_run_name(name: str) -> str:
    """`name` when it survives a TREC file (one whitespace-free field) and a folder name (at most
    `evalkit.core.names.LIMIT` characters: checked when a run is bound, before any work), else KitError."""
    if not is_storable(name):
        raise DataError("run name", f"{name!r} cannot round-trip through a TREC file and a folder name; "
                        "name the model with letters, digits and . _ - + = @ , : only")
    if _too_long(name):
        raise DataError("run name", f"{name[:40]!r}... {_too_long(name)}: give the model (or the variant) a "
                        "shorter name")
    return name


def run_folder(runs_dir: Path, settings: Any, dataset: Any) -> Path:
    """Where the run of `settings` (a `RunSettings`) lives; every path part is checked first. The
    dataset part is the collection's `store_name` when `dataset` is a collection (its name and its
    data's identity), else the text by `evalkit.core.names.name_part` (itself when plain)."""
    name = check_run_name(settings.run_name)
    if settings.queries is not None:
        subset = hashlib.sha256("\n".join(sorted(settings.queries)).encode()).hexdigest()[:10]
        name = f"{name}@subset-{subset}"
    part = name_part(dataset) if isinstance(dataset, str) else dataset.store_name
    parts = [check_path_part("profile", settings.profile), check_path_part("dataset", part),
             check_path_part("protocol", settings.protocol), name]
    return Path(runs_dir).joinpath(*parts)


# What a run folder's path stands for (`run_folder`: the run name, the dataset's folder, the profile,
# the protocol, the query subset), as its sidecar records it: a folder holding a run of other values
# is another run's, never replaced (`check_owner`). Other settings (the first stage, the depth, the
# corpus, the data's and the code's versions) are the same run made again: a new one replaces it.
OWNER_FIELDS = ("run", "dataset")
OWNER_SETTINGS = ("model", "variant", "profile", "protocol", "queries", "index_dtype", "prompt", "instructions")


def owner(sidecar: dict) -> dict:
    """The values of a sidecar (or a run's key) that its folder's path stands for (`OWNER_SETTINGS`),
    those it records (an older kit's sidecar may lack a setting added since); the query subset in
    sorted order and an instruction file by its sha256, as the path names them."""
    settings = sidecar.get("run_settings")
    settings = settings if isinstance(settings, dict) else {}
    found = {**{k: sidecar[k] for k in OWNER_FIELDS if k in sidecar},
             **{k: settings[k] for k in OWNER_SETTINGS if k in settings}}
    if isinstance(found.get("queries"), list | tuple):
        found["queries"] = sorted(map(str, found["queries"]))
    if isinstance(found.get("instructions"), dict):
        found["instructions"] = found["instructions"].get("sha256")
    return json.loads(json.dumps(found, default=str))


def check_owner(folder: Path, sidecar: dict) -> None:
    """One line (DataError naming the folder) when `folder` holds a sidecar of another run than
    `sidecar` (a run's key or its whole sidecar) by `owner`: the kit never writes one run over
    another's. A folder without a readable sidecar (none yet, or damaged) is free."""
    found = read_sidecar(folder)
    if found is None:
        return
    mine, theirs = owner(sidecar), owner(found)
    differ = [k for k in mine if k in theirs and mine[k] != theirs[k]]
    if differ:
        raise DataError(folder, f"holds another run (its {', '.join(differ)} differ: {theirs[differ[0]]!r} where "
                        f"this run has {mine[differ[0]]!r}); the kit never replaces another run: move that folder "
                        "away or give another runs folder")


def _check_ids(run: Run) -> None:
    for qid, docs in run.items():
        bad = next((i for i in (qid, *docs) if not isinstance(i, str) or not i or len(i.split()) != 1), None)
        if bad is not None:
            raise DataError("run", f"id {bad!r} (query {qid}) cannot round-trip through a TREC file; ids must be "
                                   "non-empty and without whitespace")


def _locked(folder: Path, blocking: bool = True) -> contextlib.AbstractContextManager[bool]:
    """The kit's lock (`evalkit.core.locks.exclusive`) of a folder; yields whether it was taken
    (always, when blocking). Its lock file is ``FOLDER.lock`` beside the folder (`lock_file`).

    The run folder's parent is locked while folders are swapped (concurrent writers); each
    staging folder is locked by its writer, so cleaning leftovers never removes one in use (its
    lock file, in the parent, is removed with it)."""
    return exclusive(lock_file(folder), f"run folders of {folder.name}", blocking)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or file system cannot, so the caller falls back to two renames."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _leftovers(folder: Path) -> list[Path]:
    """Hidden siblings a killed writer of `folder` may have left: staging (`.NAME.new.*`) and,
    from the two-rename fallback, the previous run set aside (`.NAME.old.*`); each named once
    whether the folder, its lock file or both remain."""
    pattern = re.compile(rf"\.{re.escape(folder.name)}\.(new|old)\.[A-Za-z0-9_]{{8}}")
    try:
        names = {p.name.removesuffix(".lock") for p in folder.parent.iterdir()}
    except OSError:
        return []
    return sorted(folder.parent / name for name in names if pattern.fullmatch(name))


def _set_aside(folder: Path) -> Path | None:
    """The previous run of `folder` left aside by a writer killed between the two fallback renames."""
    return next((p / "run" for p in _leftovers(folder) if ".old." in p.name and (p / "run").is_dir()), None)


def _clean_leftovers(folder: Path) -> None:
    """Under the parent's lock: put back a run set aside by a killed writer when the folder is
    missing, then remove every leftover that no live writer holds."""
    aside = _set_aside(folder)
    if aside is not None and not folder.exists():
        os.replace(aside, folder)
    for path in _leftovers(folder):
        with _locked(path, blocking=False) as free:
            if free:
                shutil.rmtree(path, ignore_errors=True)
        if free:
            lock_file(path).unlink(missing_ok=True)


def write_run(folder: Path, run: Run, sidecar: dict, accounting: dict | None = None) -> Path:
    """Write the run folder atomically (temporary sibling, then one swap); returns the folder.

    At every moment the folder holds the previous complete run or the new one: the staging
    folder is exchanged with it in one step (renameat2); where the system cannot, the previous
    run is set aside and readers find it there until the next write puts it back. Concurrent
    writers of one folder each write their own staging folder; the swap happens under a lock,
    so the folder ends as one writer's complete run, never a mix."""
    folder = Path(folder)
    check_run_name(sidecar["run"])
    check_run(run)
    try:
        return _write_run(folder, run, sidecar, accounting)
    except OSError as exc:  # a full disk, a read-only folder: name the run folder (one error line)
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(folder)) from exc
        raise


def _check_scores(run: Run) -> None:
    for qid, docs in run.items():
        bad = next((d for d, score in docs.items() if not is_finite_score(score)), None)
        if bad is not None:
            raise DataError(f"query {qid}, document {bad}", f"score {docs[bad]!r} is not a finite number; "
                            "the model produced it: fix its settings (e.g. a NaN parameter) or its code")


def check_run(run: Run, queries: int | None = None) -> None:
    """The one rule of what a run folder holds, applied to the run about to be written (`write_run`)
    and to the run read back (`is_verified`, `load_verified`), so the store never takes at write
    what it refuses at read: at least one query, at least one document for every query (a query
    ranking nothing leaves no line in the TREC file, so its count could not be read back), ids that
    round-trip through a TREC file, finite scores and, read back, the query count the sidecar
    records (`queries`). KitError, one line, otherwise."""
    if not run:
        raise DataError("run", "the run ranks no query; a stored run needs at least one: check the query selection")
    empty = next((qid for qid, docs in run.items() if not docs), None)
    if empty is not None:
        raise DataError(f"query {empty}", "the model ranked no document; every query of a stored run ranks at least "
                        "one: check the model (its index, its candidates) and run again")
    _check_ids(run)
    _check_scores(run)
    if queries is not None and len(run) != queries:
        raise DataError("run", f"the ranking holds {len(run)} queries where the sidecar records {queries}")


def _write_run(folder: Path, run: Run, sidecar: dict, accounting: dict | None) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as holding:
        with _locked(folder.parent):  # cleaning and creating under one lock: the new staging folder is
            _clean_leftovers(folder)  # locked before any other writer's cleaning can see it
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new.", dir=folder.parent))
            holding.callback(lock_file(staging).unlink, missing_ok=True)  # after the release below
            holding.enter_context(_locked(staging))
        _write_staged(staging, folder, run, sidecar, accounting)
    return folder


def _write_staged(staging: Path, folder: Path, run: Run, sidecar: dict, accounting: dict | None) -> None:
    """Fill `staging` (its lock held by the caller) and swap it into place."""
    try:
        write_trec(staging / RANKING, run, sidecar["run"])
        files = {RANKING: {"sha256": _sha256(staging / RANKING), "queries": len(run)}}
        if accounting is not None:
            (staging / ACCOUNTING).write_text(json.dumps(accounting, indent=1, sort_keys=True) + "\n")
        text = json.dumps({**sidecar, "files": files}, indent=1, sort_keys=True) + "\n"
        (staging / SIDECAR).write_text(text)
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        with _locked(folder.parent):
            check_owner(folder, sidecar)  # under the lock: no writer of another run swapped in meanwhile
            _swap_into_place(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # the new staging, or the previous run after the swap


def _swap_into_place(staging: Path, folder: Path) -> None:
    if not folder.exists():
        os.replace(staging, folder)
    elif not _exchange(staging, folder):
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
        os.replace(folder, old / "run")
        try:
            os.replace(staging, folder)
        except OSError:
            os.replace(old / "run", folder)  # keep the previous complete run
            raise
        shutil.rmtree(old, ignore_errors=True)


SIDECAR_LIMIT = configfile.LIMIT  # bytes of a sidecar read at most (the kit's are a few kB)


def read_sidecar(folder: Path) -> dict | None:
    """The sidecar of a run folder, or None when it is missing or unreadable: not a regular file (a
    FIFO, a device, a symbolic link), over `SIDECAR_LIMIT` bytes, not UTF-8 JSON of an object."""
    try:
        data = configfile.read_bytes(Path(folder) / SIDECAR, SIDECAR_LIMIT, follow=False, what="a sidecar")
        sidecar = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, truncated, not UTF-8, absurdly nested
        return None
    return sidecar if isinstance(sidecar, dict) else None


def _stream(path: Path, parse: bool) -> tuple[str, Run | None]:
    """(sha256 of the file at `path`, its run when `parse`): read once, block by block, both from the
    same bytes. OSError when it is not a regular file (`configfile.open_regular`, links refused:
    the kit writes none) or grows while read; KitError when `parse` and it is not a TREC run."""
    digest, reader = hashlib.sha256(), TrecReader(path) if parse else None
    with configfile.open_regular(path, follow=False) as fh:
        left = os.fstat(fh.fileno()).st_size
        while block := fh.read(min(BLOCK, left + 1)):
            left -= len(block)
            if left < 0:
                raise OSError(errno.EFBIG, "grew while being read", str(path))
            digest.update(block)
            if reader is not None:
                reader.feed(block)
    return digest.hexdigest(), None if reader is None else reader.result()


def _sha256(path: Path) -> str:
    return _stream(path, parse=False)[0]


def _is_record(name, recorded) -> bool:
    """A sidecar's entry for one file: a plain name in the folder, its sha256 and (the ranking) its
    query count, as `write_run` records them."""
    return (isinstance(name, str) and _PATH_PART.fullmatch(name) is not None and isinstance(recorded, dict)
            and isinstance(recorded.get("sha256"), str)
            and (name != RANKING or isinstance(recorded.get("queries"), int)))


def _verified(folder: Path, expected: dict) -> tuple[Path, Run] | str:
    """(the folder read, its run) when the sidecar parses, matches `expected` (every key equal),
    every listed file has its recorded sha256 and the ranking passes `check_run` (the rule
    `write_run` applies) with the recorded query count; else why not (one phrase naming the
    file). Each file is read once, and hashed and parsed from the same bytes, so a folder
    swapped by another writer meanwhile gives a mismatch, never a mix of two runs or an error;
    only regular files of the folder are read (a sidecar naming another path, a FIFO or a device
    is a mismatch, not a hang).

    A folder missing because its writer was killed between the fallback's two renames is put
    back first (under the parent's lock), so the folder a caller reports is the one read; where
    it cannot be put back (a read-only store), the run is read from where it was set aside."""
    folder = Path(folder)
    if not folder.exists() and _set_aside(folder) is not None:
        try:
            with _locked(folder.parent):
                _clean_leftovers(folder)
        except (OSError, DataError):  # a read-only store: no lock file, no rename
            pass
        if not folder.exists():
            folder = _set_aside(folder) or folder
    sidecar = read_sidecar(folder)
    if sidecar is None:
        return f"{folder / SIDECAR} is missing or damaged (not a regular file of JSON)"
    if any(sidecar.get(k) != json.loads(json.dumps(v)) for k, v in expected.items()):
        return f"{folder / SIDECAR} records another run"
    files = sidecar.get("files")
    if not isinstance(files, dict) or RANKING not in files or not all(_is_record(*kv) for kv in files.items()):
        return f"{folder / SIDECAR} lists its files otherwise than the kit writes them"
    run, name = None, RANKING
    try:
        for name, recorded in files.items():
            digest, parsed = _stream(folder / name, name == RANKING)
            if digest != recorded["sha256"]:
                return f"{folder / name} does not match its sha256 in {SIDECAR}"
            run = parsed if name == RANKING else run
        check_run(run, files[RANKING]["queries"])
    except OSError as exc:
        return f"{folder / name} cannot be read ({exc.strerror or exc})"
    except (KitError, TrecFault) as exc:
        return f"{folder / RANKING} is not a run the store holds ({exc})"
    return folder, run


def unverified(folder: Path, expected: dict) -> str | None:
    """Why the run folder holds no run `load_verified` returns (one phrase naming the file), or None."""
    found = _verified(folder, expected)
    return found if isinstance(found, str) else None


def is_verified(folder: Path, expected: dict) -> bool:
    """Whether the run folder holds a run `load_verified` returns (the same check, `_verified`):
    for a caller that needs the folder only (`evalkit run`)."""
    return not isinstance(_verified(folder, expected), str)


def load_verified(folder: Path, expected: dict) -> Run | None:
    """The stored run when it is complete and matches `expected` (every key equal), else None:
    verified by sha256 on the bytes read, parsed from them, and held to `check_run` with its
    recorded query count (`_verified`)."""
    found = _verified(folder, expected)
    return None if isinstance(found, str) else found[1]
