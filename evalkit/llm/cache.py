"""SQLite store of LLM judgments, so that an interrupted run resumes where it stopped.

A judgment is keyed by model, revision, numerics (a local model's dtype and device kind,
which change the last digits of its answers; for an API, the server and the decoding
options, `evalkit.llm.openai_api.api_numerics`), template digest, seed text hash,
instruction text hash, the document ids in prompt order (second empty for pointwise)
and a hash of the candidate texts as prompted; it stores P(first label). For a server the
kit starts, the server's identity includes the vllm executable's (`evalkit.llm.vllm_server`),
so judgments of one vLLM build are never served for another. Every `put` commits. A
``judgments`` table lacking one of these columns was not written by this kit (no release wrote
one) and is refused with one line.

Each row carries a checksum (`row_checksum`: BLAKE2b over the row's key digest, which hashes
every key field, and the exact float64 bytes of p), checked on read, failing closed: a changed
p (one flipped bit), a p moved to another key (rows swapped with their checksums), a row
without a checksum (NULL) or a p that is not a
finite probability in [0, 1] counts as missing, so it is asked again (one note per cache).
The checksum is not a signature: a deliberate edit that recomputes it is not detected
(docs/reference/runs-and-caches.md). Only a finite probability in [0, 1] is stored.

A file that is not a sound SQLite database, or a folder that cannot be written (read-only,
disk full), stops the run with one line naming the file and the fix. Processes share the
file (SQLite, WAL): one writes at a time, and a process finding it held waits
(`evalkit.core.locks.waiting`), never calling it damaged.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import struct
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from evalkit.core.errors import DataError, KitError
from evalkit.core.locks import BUSY_MS, is_locked, lock_wait_s, waiting


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Key(NamedTuple):
    model: str
    revision: str
    numerics: str
    template: str
    seed: str
    instruction: str
    first: str
    second: str
    texts: str

    @property
    def digest(self) -> str:
        return hashlib.sha256("\0".join(self).encode()).hexdigest()


def valid_prob(p) -> bool:
    """A probability fit to be cached: a finite real number in [0, 1]."""
    return isinstance(p, (float, int)) and not isinstance(p, bool) and math.isfinite(p) and 0.0 <= p <= 1.0


def row_checksum(digest: str, p: float) -> str:
    """A row's checksum: BLAKE2b (16 bytes) over its key digest and the float64 bytes of p."""
    return hashlib.blake2b(digest.encode() + b"\0" + struct.pack("<d", p), digest_size=16).hexdigest()


def sound(digest: str, p, check) -> bool:
    """Whether a stored row may be served: a valid probability under its own key's checksum."""
    return valid_prob(p) and isinstance(check, str) and check == row_checksum(digest, float(p))


class JudgmentCache:
    def __init__(self, path: Path):
        self.path = path = Path(path)
        self._noted = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, check_same_thread=False, timeout=BUSY_MS / 1000)
            waiting(path, self._prepare, "judgment cache")
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc) from None

    def _prepare(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")  # commits survive a killed process without a sync each
        self.db.execute("PRAGMA synchronous=NORMAL")
        columns = ", ".join(f"{name} TEXT" for name in Key._fields)
        self.db.execute(f"CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, {columns}, p REAL, "
                        "checksum TEXT)")
        self.db.commit()
        present = {row[1] for row in self.db.execute("PRAGMA table_info(judgments)")}
        missing = next((name for name in ("key", *Key._fields, "p", "checksum") if name not in present), None)
        if missing is not None:  # no release wrote such a table
            raise DataError(self.path, f"not a judgment cache of this kit (its judgments table has no {missing} "
                           f"column); delete {self.path.name} to rebuild it (the judgments are then asked again)")
        check = self.db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(check)
        self.db.execute("SELECT key, p FROM judgments LIMIT 1").fetchall()

    def _error(self, exc: Exception) -> KitError:
        text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        lowered = text.lower()
        if is_locked(exc):
            fix = (f"another process held it for {lock_wait_s():g} s; wait for that process to finish (or stop "
                   "it), or raise EVALKIT_LOCK_WAIT_S")
        elif "readonly" in lowered or "read-only" in lowered or "permission" in lowered or "unable to open" in lowered:
            fix = "make the folder writable or point the model's `cache` setting (or $EVALKIT_CACHE) elsewhere"
        elif "full" in lowered or "no space" in lowered:
            fix = "free disk space or point the model's `cache` setting (or $EVALKIT_CACHE) elsewhere"
        else:
            fix = (f"delete it (with {self.path.name}-wal and {self.path.name}-shm) to rebuild it; "
                   "the judgments are then asked again")
        return KitError(f"{self.path}: judgment cache unusable ({text}); {fix}")

    def get(self, keys: Iterable[Key]) -> dict[Key, float]:
        by_digest = {k.digest: k for k in keys}
        digests = list(by_digest)
        found, damaged = {}, 0
        try:
            for start in range(0, len(digests), 900):  # SQLite's bound on query parameters
                part = digests[start:start + 900]
                query = f"SELECT key, p, checksum FROM judgments WHERE key IN ({','.join('?' * len(part))})"
                rows = waiting(self.path, lambda q=query, p=part: self.db.execute(q, p).fetchall(), "judgment cache")
                for digest, p, check in rows:
                    if sound(digest, p, check):
                        found[by_digest[digest]] = p
                    else:
                        damaged += 1
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        if damaged and not self._noted:  # once per cache: a run reads it query by query
            self._noted = True
            print(f"evalkit: note: {self.path}: stored judgments fail their checksum (changed, moved to another "
                  "key, without one, or not a probability); they are asked again", file=sys.stderr)
        return found

    def put(self, judgments: dict[Key, float]) -> None:
        bad = [p for p in judgments.values() if not valid_prob(p)]
        if bad:
            raise DataError(self.path, f"refusing to cache the probability {bad[0]!r}; the model's answer is invalid")
        if not judgments:
            return
        columns = ", ".join(("key", *Key._fields, "p", "checksum"))
        marks = ",".join("?" * (len(Key._fields) + 3))
        try:
            # + 0.0: -0.0 reads back from SQLite as 0.0, so it is stored (and checksummed) as 0.0
            rows = [(k.digest, *k, float(p) + 0.0, row_checksum(k.digest, float(p) + 0.0))
                    for k, p in judgments.items()]

            def write():
                with self.db:
                    self.db.executemany(f"INSERT OR REPLACE INTO judgments ({columns}) VALUES ({marks})", rows)
            waiting(self.path, write, "judgment cache")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        self.db.close()
