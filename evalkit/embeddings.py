"""Sentence-transformers encoding with a persistent, resumable embedding cache.

Each unique text is encoded once per model fingerprint: vectors are stored in a
SQLite file under the cache folder, keyed by sha256(fingerprint + text). The
fingerprint hashes everything that changes a vector (model location and revision,
adapter, sequence length, normalisation, kit cache version). Encoding runs in
chunks committed one by one, so a killed run resumes with only the missing texts.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from evalkit.errors import KitError
from evalkit.hashing import files_sha256
from evalkit.vector_cache import EmbeddingCache

CACHE_VERSION = 1
CHUNK = 512


def cache_root() -> Path:
    """Run and embedding caches: ``$EVALKIT_CACHE`` or ``~/.cache/evalkit``."""
    return Path(os.environ.get("EVALKIT_CACHE") or Path.home() / ".cache" / "evalkit")


def folder_revision(folder: Path) -> str:
    """Content hash of a local model folder (file names and bytes)."""
    paths = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    return files_sha256(paths, [str(p.relative_to(folder)) for p in paths])[:16]


class Encoder:
    """A sentence-transformers model behind the embedding cache.

    `location` is a hub id or a local folder; `revision` pins a hub commit (a local
    folder's revision is its content hash).
    """

    def __init__(self, location: str, revision: str | None = None, max_seq_length: int | None = None,
                 batch_size: int = 32, normalize: bool = True, cache_dir: Path | None = None,
                 devices: list[str] | None = None):
        self.location = location
        local = Path(location).is_dir()
        self.revision = folder_revision(Path(location)) if local else (revision or "main")
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.devices = list(devices) if devices else None  # several: a multi-process pool
        self._pool = None
        settings = {"location": str(Path(location).resolve()) if local else location,
                    "revision": self.revision, "max_seq_length": max_seq_length,
                    "normalize": normalize, "version": CACHE_VERSION,
                    "device_kind": (self.devices or [_device()])[0].split(":")[0]}
        self.fingerprint = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
        self.cache = EmbeddingCache((cache_dir or cache_root()) / "embeddings" / f"{self.fingerprint}.sqlite",
                                    self.fingerprint)
        self._model = None
        self._memory: dict[str, np.ndarray] = {}
        self.texts_encoded = 0  # texts sent to the model in this process (for benchmarks)

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            try:
                kwargs = {} if Path(self.location).is_dir() else {"revision": self.revision}
                self._model = SentenceTransformer(self.location, device=(self.devices or [_device()])[0], **kwargs)
            except OSError as exc:
                raise KitError(f"cannot load model {self.location} ({exc}); check the hub id or folder") from None
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    def _process_pool(self):
        """A sentence-transformers multi-process pool over `devices` (several GPUs or CPU processes)."""
        if not self.devices or len(self.devices) < 2:
            return None
        if self._pool is None:
            self._pool = self.model.start_multi_process_pool(self.devices)
            atexit.register(self.model.stop_multi_process_pool, self._pool)
        return self._pool

    def encode(self, texts: Sequence[str], desc: str = "encoding") -> np.ndarray:
        """Vectors for `texts` in order; only texts never seen by this fingerprint reach the model."""
        keys = [self.cache.key(t) for t in texts]
        missing = [k for k in dict.fromkeys(keys) if k not in self._memory]
        self._memory.update(self.cache.get(missing))
        by_key = dict(zip(keys, texts))
        todo = [k for k in missing if k not in self._memory]
        with tqdm(total=len(todo), desc=desc, unit="text", disable=len(todo) < 64) as bar:
            for start in range(0, len(todo), CHUNK):
                chunk = todo[start:start + CHUNK]
                vectors = self.model.encode([by_key[k] for k in chunk], batch_size=self.batch_size,
                                            normalize_embeddings=self.normalize, convert_to_numpy=True,
                                            pool=self._process_pool())
                fresh = dict(zip(chunk, vectors.astype(np.float32)))
                self.cache.put(fresh)
                self._memory.update(fresh)
                self.texts_encoded += len(chunk)
                bar.update(len(chunk))
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._memory[k] for k in keys])


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
