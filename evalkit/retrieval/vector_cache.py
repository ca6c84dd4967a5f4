"""The embedding store: float32 vectors in SQLite, keyed by sha256(model fingerprint + text).

One file per model fingerprint under ``$EVALKIT_CACHE/embeddings``; every `put` commits,
so a killed encoding resumes with only the missing texts.

Vectors are checked on write (one dimension for the whole file, recorded in its ``meta``
table; finite values only) and on read: a stored vector of another length or with NaN/inf
values counts as missing, so it is encoded again and replaced, and the result is the one a
fresh cache gives. A file SQLite cannot read (truncated, overwritten, not a database), a
read-only file or a full disk is a one-line `KitError` naming the file and the fix: delete
the file to rebuild it (its texts are encoded again), or point ``EVALKIT_CACHE`` elsewhere.

Every stored vector carries a checksum (column ``checksum``: 16 bytes of BLAKE2b over the
file's model fingerprint, the row's key and the vector's bytes; the key is itself
sha256(fingerprint + text), the fingerprint hashes the model's identity and every setting
that changes a vector), checked on read. So a row is used only for the key it was written
for: a changed byte, a vector moved to another key (rows swapped with their checksums), a
row copied from another model's file or a missing (NULL) checksum makes that vector count
as damaged; it is encoded again, with one note per read, and the result is the one a fresh
cache gives. A ``vectors`` table without a checksum column was not written by this kit (no
release wrote one) and is refused with one line. The checksum is not a signature: whoever
rewrites a row can recompute its checksum, so a deliberate edit is not detected
(docs/reference/runs-and-caches.md).

Several processes may share one file: SQLite lets one write at a time. A process that finds
the file locked by another waits (a note on stderr after a few seconds) for up to
``EVALKIT_LOCK_WAIT_S`` seconds (default 3600), then stops with one line saying which file is
held; a lock is never reported as damage.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalkit.core.errors import DataError, KitError
from evalkit.core.locks import BUSY_MS, is_locked, lock_wait_s, waiting


def cache_error(path: Path, exc: BaseException, what: str = "embedding cache") -> KitError:
    """One line naming the cache file, what went wrong and what the user does about it."""
    text = str(exc) or type(exc).__name__
    low = text.lower()
    if "locked" in low or "busy" in low:
        fix = (f"the {what} stayed locked by another process for {lock_wait_s():g} s; wait for that process to "
               "finish (or stop it), or raise EVALKIT_LOCK_WAIT_S")
    elif "readonly" in low or "read-only" in low or "permission" in low:
        fix = f"the {what} is read-only; make it writable or set EVALKIT_CACHE to a writable folder"
    elif "full" in low or "no space" in low:
        fix = f"no space left for the {what}; free disk space or set EVALKIT_CACHE to another disk"
    elif "unable to open" in low or "cannot open" in low:
        fix = f"cannot open the {what}; check the folder exists and is writable, or set EVALKIT_CACHE"
    else:
        fix = f"the {what} is damaged; delete {Path(path).name} to rebuild it (its texts are encoded again)"
    return KitError(f"{path}: {fix} (sqlite: {text})")


def checksum(fingerprint: str, key: str, blob: bytes) -> str:
    """The row checksum: BLAKE2b (16 bytes) over the file's fingerprint, the row's key and the vector's
    bytes, so a vector checks only under the key and model it was stored for."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (fingerprint.encode(), key.encode(), blob):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


class EmbeddingCache:
    """SQLite store of float32 vectors by (fingerprint, text), checked on read and on write."""

    def __init__(self, path: Path, fingerprint: str):
        self.path = Path(path)
        self.fingerprint = fingerprint
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cache_error(self.path, exc) from None
        try:
            self.db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000)
            waiting(self.path, self._prepare)
        except sqlite3.Error as exc:
            raise cache_error(self.path, exc) from None

    def __getstate__(self) -> dict:
        """Pickled (sent to a Ray worker) as its path and fingerprint; the copy opens the file anew."""
        return {"path": self.path, "fingerprint": self.fingerprint}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["fingerprint"])

    def _prepare(self) -> None:
        with self.db:
            self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB, checksum TEXT)")
        present = {row[1] for row in self.db.execute("PRAGMA table_info(vectors)")}
        if not {"key", "vector", "checksum"} <= present:
            raise DataError(self.path, f"not an embedding cache of this kit (its vectors table has no checksum "
                            f"column); delete {self.path.name} to rebuild it (its texts are encoded again)")
        self.dim = self._stored_dim()

    def _stored_dim(self) -> int | None:
        try:
            with self.db:
                self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            row = self.db.execute("SELECT value FROM meta WHERE name = 'dim'").fetchone()
        except sqlite3.OperationalError as exc:  # a read-only file of an older kit: no meta table yet
            if is_locked(exc):
                raise
            row = None
        if row is not None:
            text = str(row[0])
            if not text.isdigit() or int(text) < 1:
                raise DataError(self.path, f"the embedding cache is damaged (its recorded dimension is "
                                f"{row[0]!r}); delete {self.path.name} to rebuild it (its texts are encoded again)")
            return int(text)
        row = self.db.execute("SELECT length(vector) FROM vectors LIMIT 1").fetchone()  # an older file
        return row[0] // 4 if row and row[0] and row[0] % 4 == 0 else None

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.fingerprint}\0{text}".encode()).hexdigest()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of `keys`; damaged vectors (a checksum that is missing or does not
        match the row's key and bytes, a wrong length, NaN/inf) are left out, so the caller
        encodes them again."""
        found, damaged = {}, 0
        try:
            for start in range(0, len(keys), 900):  # SQLite's bound on query parameters
                part = list(keys[start:start + 900])
                marks = ",".join("?" * len(part))
                query = f"SELECT key, vector, checksum FROM vectors WHERE key IN ({marks})"
                for key, blob, check in waiting(self.path, lambda q=query, p=part: self.db.execute(q, p).fetchall()):
                    vector = self._decode(key, blob, check)
                    if vector is None:
                        damaged += 1
                    else:
                        found[key] = vector
        except sqlite3.Error as exc:
            raise cache_error(self.path, exc) from None
        if damaged:
            print(f"evalkit: note: {self.path}: {damaged} damaged vectors (a missing or mismatched checksum, a "
                  "wrong length or NaN/inf) are encoded again", file=sys.stderr)
        return found

    def _decode(self, key: str, blob, check) -> np.ndarray | None:
        if not isinstance(blob, bytes) or not blob or len(blob) % 4:
            return None
        if not isinstance(check, str) or check != checksum(self.fingerprint, key, blob):  # fail closed
            return None
        vector = np.frombuffer(blob, dtype=np.float32)
        if self.dim is not None and vector.shape[0] != self.dim:
            return None
        return vector if np.isfinite(vector).all() else None

    def put(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors (all of the file's one dimension, all finite); nothing is stored otherwise."""
        if not items:
            return
        rows = []
        for key, value in items.items():
            vector = np.asarray(value, dtype=np.float32)
            if vector.ndim != 1 or vector.shape[0] == 0:
                raise DataError(self.path, f"the model gave a vector of shape {vector.shape}; "
                                "expected one non-empty vector per text")
            if not np.isfinite(vector).all():
                raise DataError(self.path, "the model gave NaN or infinite vector values; nothing was cached "
                                "(check the model's weights and dtype)")
            if self.dim is None:
                self.dim = vector.shape[0]
            if vector.shape[0] != self.dim:
                raise DataError(self.path, f"the model gave {vector.shape[0]}-dimensional vectors where the "
                                f"cache holds {self.dim}; delete {self.path.name} to rebuild it")
            blob = vector.tobytes()
            rows.append((key, blob, checksum(self.fingerprint, key, blob)))

        def write():
            with self.db:
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(self.dim),))
                self.db.executemany("INSERT OR REPLACE INTO vectors (key, vector, checksum) VALUES (?, ?, ?)", rows)
        try:
            waiting(self.path, write)
        except sqlite3.Error as exc:
            raise cache_error(self.path, exc) from None
