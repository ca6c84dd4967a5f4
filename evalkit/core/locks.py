"""One writer at a time for the kit's shared on-disk state.

Vector and BM25 indexes, run folders: `exclusive`. SQLite caches (embeddings, LLM judgments): SQLite
itself lets one process write at a time; `waiting` retries an operation while another process holds
the file, for up to ``EVALKIT_LOCK_WAIT_S`` seconds (a positive number; default 3600), so a lock is
a wait with a note, never reported as damage.

`exclusive(path)` holds a `filelock.FileLock` on a small lock file (``FOLDER.lock`` beside the folder it
guards, `lock_file`), left in place: removing it could let two writers lock two different files. On
POSIX that is an advisory ``flock``, released when the holder exits, however it ends (the kernel drops
it with the file descriptor), so a killed writer never blocks the next one; where ``fcntl`` is missing
filelock takes its soft lock (the file's existence, broken when its recorded owner process is gone).
A process that waits says so once on stderr, so a long wait behind another build is not mistaken
for a hang.
"""

from __future__ import annotations

import math
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from evalkit.core.errors import DataError

NOTE_AFTER_S = 1.0  # a wait longer than this is reported (once)
BUSY_MS = 200  # SQLite's own wait per attempt; `waiting` repeats attempts


def lock_file(folder: Path) -> Path:
    """The lock file of `folder`: ``FOLDER.lock`` beside it (the one naming rule of the kit's locks)."""
    folder = Path(folder)
    return folder.with_name(folder.name + ".lock")


@contextmanager
def exclusive(path: Path, what: str, blocking: bool = True) -> Iterator[bool]:
    """Hold the exclusive lock on ``path`` (a lock file, created if missing) while inside; yields
    whether it was taken (always, when `blocking`: it waits, with a note once after `NOTE_AFTER_S`).
    `what` names the guarded state in the waiting note and the error; a lock file that cannot be
    created is a `DataError` naming it."""
    lock_wait_s()  # its setting refused on first use, as `waiting` does
    path = Path(path)
    lock = FileLock(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        taken = _acquire(lock, path, what, blocking)
    except OSError as exc:
        raise DataError(path, f"cannot create the lock file of the {what} ({exc.strerror}); make the folder "
                        "writable or set EVALKIT_CACHE to a writable folder") from None
    if not taken:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def _acquire(lock: FileLock, path: Path, what: str, blocking: bool) -> bool:
    try:
        lock.acquire(timeout=NOTE_AFTER_S, blocking=blocking)  # not blocking: one attempt
        return True
    except Timeout:
        if not blocking:
            return False
    print(f"evalkit: note: waiting for another process building the {what} ({path.parent}); "
          "it is used as soon as that build ends", file=sys.stderr)
    lock.acquire()
    return True


LOCK_WAIT_ENV = "EVALKIT_LOCK_WAIT_S"
LOCK_WAIT_S = 3600.0  # the default


def lock_wait_s() -> float:
    """How long a process waits for a cache file another process holds: ``EVALKIT_LOCK_WAIT_S``
    (a positive, finite number of seconds), else `LOCK_WAIT_S`. The variable's one reader; read
    at every wait's start, so a bad value is refused on first use, not only when a lock is met."""
    text = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not text:
        return LOCK_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise DataError(f"{LOCK_WAIT_ENV}={text!r}", f"is not a positive number of seconds; give one (e.g. 600) or "
                        f"unset it for {LOCK_WAIT_S:g}")
    return value


def is_locked(exc: BaseException) -> bool:
    """Whether a SQLite error is another process holding the file (wait), not damage."""
    low = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in low or "busy" in low)


def waiting(path: Path, action, what: str = "cache"):
    """`action()`, retried while another process holds the SQLite file at `path` (a note once, after
    `NOTE_AFTER_S`), up to `lock_wait_s` seconds; then the error propagates (`cache_error`: locked)."""
    lock_wait_s()  # a bad EVALKIT_LOCK_WAIT_S is refused here, before the first attempt
    started, noted = time.monotonic(), False
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            waited = time.monotonic() - started
            if not is_locked(exc) or waited >= lock_wait_s():
                raise
            if not noted and waited >= NOTE_AFTER_S:
                print(f"evalkit: note: {path}: the {what} is locked by another process; waiting for it",
                      file=sys.stderr)
                noted = True
            time.sleep(0.05)
