"""SQLite store of LLM judgments, so that an interrupted run resumes where it stopped.

A judgment is keyed by model, revision, template digest, seed text hash, instruction
text hash, the document ids in prompt order (second empty for pointwise) and a hash
of the candidate texts as prompted; it stores P(first label). Every `put` commits.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Key(NamedTuple):
    model: str
    revision: str
    template: str
    seed: str
    instruction: str
    first: str
    second: str
    texts: str

    @property
    def digest(self) -> str:
        return hashlib.sha256("\0".join(self).encode()).hexdigest()


class JudgmentCache:
    def __init__(self, path: Path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")  # commits survive a killed process without a sync each
        self.db.execute("PRAGMA synchronous=NORMAL")
        columns = ", ".join(f"{name} TEXT" for name in Key._fields)
        self.db.execute(f"CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, {columns}, p REAL)")

    def get(self, keys: Iterable[Key]) -> dict[Key, float]:
        by_digest = {k.digest: k for k in keys}
        digests = list(by_digest)
        found = {}
        for start in range(0, len(digests), 900):  # SQLite's bound on query parameters
            part = digests[start:start + 900]
            rows = self.db.execute(f"SELECT key, p FROM judgments WHERE key IN ({','.join('?' * len(part))})", part)
            found.update({by_digest[digest]: p for digest, p in rows})
        return found

    def put(self, judgments: dict[Key, float]) -> None:
        marks = ",".join("?" * (len(Key._fields) + 2))
        with self.db:
            self.db.executemany(f"INSERT OR REPLACE INTO judgments VALUES ({marks})",
                                [(k.digest, *k, p) for k, p in judgments.items()])
