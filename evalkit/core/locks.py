"""One writer at a time for the kit's shared on-disk state.

Vector and BM25 indexes: `exclusive`. SQLite caches (embeddings, LLM judgments): SQLite itself
lets one process write at a time; `waiting` retries an operation while another process holds
the file, for up to ``EVALKIT_LOCK_WAIT_S`` seconds (a positive number; default 3600), so a lock is
a wait with a note, never reported as damage.

`exclusive(path)` holds an advisory ``flock`` on a small lock file beside what it guards
(``NAME.lock``, left in place: removing it could let two writers lock two different files).
A process that waits says so once on stderr, so a long wait behind another build is not
mistaken for a hang; the lock is released when the holder exits, however it ends (the
kernel drops it with the file descriptor), so a killed writer never blocks the next one.
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

from evalkit.core.errors import DataError

NOTE_AFTER_S = 1.0  # a wait longer than this is reported (once)
BUSY_MS = 200  # SQLite's own wait per attempt; `waiting` repeats attempts


@contextmanager
def exclusive(path: Path, what: str) -> Iterator[None]:
    """Hold the exclusive lock on ``path`` (a lock file, created if missing) while inside.
    `what` names the guarded state in the waiting note."""
    lock_wait_s()  # its setting refused on first use, as `waiting` does
    try:
        import fcntl
    except ImportError:  # not POSIX: no second writer is kept out (documented in the README)
        yield
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise DataError(path, f"cannot create the lock file of the {what} ({exc.strerror}); make the folder "
                        "writable or set EVALKIT_CACHE to a writable folder") from None
    try:
        started, noted = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not noted and time.monotonic() - started >= NOTE_AFTER_S:
                    print(f"evalkit: note: waiting for another process building the {what} ({path.parent}); "
                          "it is used as soon as that build ends", file=sys.stderr)
                    noted = True
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


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
