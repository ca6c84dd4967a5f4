"""The embedding store: float32 vectors in SQLite, keyed by sha256(model fingerprint + text).

One file per model fingerprint under ``$EVALKIT_CACHE/embeddings``; every `put` commits,
so a killed encoding resumes with only the missing texts.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np


class EmbeddingCache:
    """SQLite store of float32 vectors by (fingerprint, text)."""

    def __init__(self, path: Path, fingerprint: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB)")

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.fingerprint}\0{text}".encode()).hexdigest()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found = {}
        for start in range(0, len(keys), 900):  # SQLite's bound on query parameters
            part = keys[start:start + 900]
            marks = ",".join("?" * len(part))
            for key, blob in self.db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, items: dict[str, np.ndarray]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
            )
