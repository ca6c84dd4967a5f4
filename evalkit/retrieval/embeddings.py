"""Encoding with a persistent, resumable embedding cache, shared by every embedding model.

`CachedVectors` is the one cache path: each unique input (its exact model text, plus the
instruction or other parts that change the vector) is encoded once per model fingerprint;
vectors (or per-document matrices of sentence vectors) are stored in a SQLite file under
the cache folder, keyed by sha256(fingerprint + input key), each row with a checksum over
its fingerprint, key and bytes (`evalkit.retrieval.vector_cache`: a row that fails it, or
has none, is encoded again). The fingerprint hashes
everything that changes a vector (the encoder's ``describe()``: model location and
revision or a local folder's content hash, adapter, sequence length, pooling,
normalisation; and the kit cache version). Encoding runs in chunks committed one by one,
so a killed run resumes with only the missing inputs; a non-finite vector is never stored.

`Encoder` is the sentence-transformers model behind that cache (the offline profile's
models), run by PyTorch or (``backend="onnx"``) by ONNX Runtime on a local export of the
same weights (`evalkit.encoders.onnx`); the backend is part of the fingerprint, so vectors
of the two never share a cache file. The paper's encoders (`evalkit.encoders`) go through `CachedVectors` in
`evalkit.models.paper`.
"""

from __future__ import annotations

import atexit
import json
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np

from evalkit.core import progress
from evalkit.core.devices import device_kind, resolve_device
from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import fingerprint, folder_revision
from evalkit.core.workspace import cache_root
from evalkit.encoders.onnx import EXPORT_VERSION, OPSET, OnnxSentenceEncoder
from evalkit.retrieval.corpus import CHUNK
from evalkit.retrieval.vector_cache import EmbeddingCache

CACHE_VERSION = 1
BACKENDS = ("torch", "onnx")


def location_settings(location: str, revision: str | None) -> dict:
    """What pins a model's files: a local folder's resolved path and content hash, else the hub
    id and revision (default main)."""
    local = Path(location).is_dir()
    return {"location": str(Path(location).resolve()) if local else location,
            "revision": folder_revision(Path(location)) if local else (revision or "main")}


class CachedVectors:
    """Vectors by input under one model fingerprint: memory, then SQLite, then the model.

    `settings` is everything that changes a vector (typically an encoder's ``describe()``,
    with local folders pinned by `location_settings`); ``version`` is added. With
    ``matrices=True`` each input maps to an (n, dim) array (e.g. one row per sentence).
    """

    def __init__(self, settings: dict, cache_dir: Path | None = None, matrices: bool = False):
        self.settings = {**settings, "version": CACHE_VERSION}
        self.fingerprint = fingerprint(self.settings)
        self.cache = EmbeddingCache((cache_dir or cache_root()) / "embeddings" / f"{self.fingerprint}.sqlite",
                                    self.fingerprint)
        self.matrices = matrices
        self._memory: dict[str, np.ndarray] = {}
        self.encoded = 0  # inputs sent to the model in this process (for benchmarks and tests)

    def __getstate__(self) -> dict:
        """Pickled (sent to a Ray worker) without the vectors held in memory."""
        return {**self.__dict__, "_memory": {}}

    def _check(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array, dtype=np.float32)
        if array.ndim != (2 if self.matrices else 1) or array.size == 0:
            raise DataError("encoder output",
                            f"the encoder gave an array of shape {array.shape}; expected one non-empty "
                            f"{'(rows, dim) matrix' if self.matrices else 'vector'} per input")
        if not np.isfinite(array).all():
            raise DataError("encoder output",
                            f"the model gave a non-finite vector (fingerprint {self.fingerprint}); nothing was "
                            "cached: check the model's dtype and inputs")
        return array

    def _stored(self, keys: list[str]) -> dict[str, np.ndarray]:
        """Stored arrays of `keys`. A matrix is stored row by row (every vector of a cache file has
        one length) under its key plus the row number, after a header row whose values are the
        row count; it counts as stored only when the header and every row are."""
        if not self.matrices:
            return self.cache.get(keys)
        headers = self.cache.get(keys)
        rows = {key: int(round(float(h[0]))) for key, h in headers.items()}
        wanted = [self.cache.key(f"{key}\0{i}") for key, n in rows.items() for i in range(n)]
        found = self.cache.get(wanted)
        out = {}
        for key, n in rows.items():
            parts = [found.get(self.cache.key(f"{key}\0{i}")) for i in range(n)]
            if n and all(p is not None for p in parts):
                out[key] = np.stack(parts)
        return out

    def _store(self, arrays: dict[str, np.ndarray]) -> None:
        if not self.matrices:
            self.cache.put(arrays)
            return
        flat = {}
        for key, matrix in arrays.items():
            flat.update({self.cache.key(f"{key}\0{i}"): row for i, row in enumerate(matrix)})
        flat.update({key: np.full(m.shape[1], m.shape[0], dtype=np.float32) for key, m in arrays.items()})
        self.cache.put(flat)  # one transaction: the headers commit with their rows

    def get(self, items: Sequence, key: Callable[[object], Hashable], compute: Callable[[list], Sequence[np.ndarray]],
            desc: str = "encoding", chunk: int | None = None) -> list[np.ndarray]:
        """The arrays of `items` in order. `key(item)` is the exact input the model reads (a
        string, or a tuple of strings such as (instruction prefix, text)); `compute(list of
        items)` encodes the items no cache holds, `chunk` at a time, each chunk committed."""
        keys = [self.cache.key(k if isinstance(k, str) else json.dumps(k)) for k in map(key, items)]
        by_key = dict(zip(keys, items))
        memory = self._memory
        missing = [k for k in by_key if k not in memory]
        memory.update(self._stored(missing))
        todo = [k for k in missing if k not in memory]
        size = chunk or CHUNK
        with progress.bar(total=len(todo), desc=desc, unit="text", min_total=64) as bar:
            for start in range(0, len(todo), size):
                part = todo[start:start + size]
                arrays = list(compute([by_key[k] for k in part]))
                if len(arrays) != len(part):
                    raise DataError("encoder output",
                                    f"the encoder returned {len(arrays)} arrays for {len(part)} inputs")
                fresh = {k: self._check(a) for k, a in zip(part, arrays)}
                self._store(fresh)
                memory.update(fresh)
                self.encoded += len(part)
                bar.update(len(part))
        return [memory[k] for k in keys]

    def stack(self, items: Sequence, key: Callable[[object], Hashable], compute: Callable[[list], np.ndarray],
              desc: str = "encoding") -> np.ndarray:
        """`get` for single vectors, stacked into (len(items), dim)."""
        found = self.get(items, key, compute, desc)
        return np.stack(found) if found else np.zeros((0, 0), dtype=np.float32)


class Encoder:
    """A sentence-transformers model behind the embedding cache.

    `location` is a hub id or a local folder; `revision` pins a hub commit (a local
    folder's revision is its content hash). `backend` is ``torch`` (sentence-transformers
    on `devices`) or ``onnx`` (ONNX Runtime on the CPU, `threads` intra-op threads; a local
    folder only, its export cached under the cache folder).
    """

    def __init__(self, location: str, revision: str | None = None, max_seq_length: int | None = None,
                 batch_size: int = 32, normalize: bool = True, cache_dir: Path | None = None,
                 devices: list[str] | None = None, backend: str = "torch", threads: int | None = None,
                 name: str | None = None):
        for option, value, optional in (("batch_size", batch_size, False), ("max_seq_length", max_seq_length, True),
                                        ("threads", threads, True)):
            if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, int)
                                                     or value < 1):
                raise DataError("model settings",
                                f"{option}={value!r} must be a positive integer; fix the model settings")
        if backend not in BACKENDS:
            raise DataError("model settings",
                            f"backend {backend!r} is not one of {list(BACKENDS)}; fix the model settings")
        if backend == "onnx" and devices:
            raise DataError("model settings",
                            "backend onnx runs on the CPU in one process; remove devices or use backend torch")
        self.backend = backend
        self.threads = threads
        self.cache_dir = cache_dir
        self._onnx = None
        self.location = location
        self.name = name or Path(location).name  # shown in progress bars
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.normalize = normalize
        self.devices = list(devices) if devices else None  # several: a multi-process pool
        self.device = resolve_device(self.devices[0] if self.devices else None)  # the one a single process uses
        self._pool = None
        pinned = location_settings(location, revision)
        self.revision = pinned["revision"]
        settings = {**pinned, "max_seq_length": max_seq_length, "normalize": normalize,
                    "device_kind": "cpu" if backend == "onnx" else device_kind(self.device)}
        if backend == "onnx":  # torch fingerprints stay those of earlier caches
            settings.update(backend="onnx", onnx_export=EXPORT_VERSION, onnx_opset=OPSET)
        self.vectors = CachedVectors(settings, cache_dir)
        self.fingerprint = self.vectors.fingerprint
        self.cache = self.vectors.cache
        self._model = None

    def __getstate__(self) -> dict:
        """Pickled (sent to a Ray worker) without the loaded model, which the copy loads on first use."""
        return {**self.__dict__, "_model": None, "_pool": None, "_onnx": None}

    def __setstate__(self, state: dict) -> None:
        """A copy (on a Ray worker) whose settings name no device loads the model on the device of
        the process it lands in (its GPU), not the sender's; the cache fingerprint stays the
        sender's (a worker writes no cache; the index says the workers' device:
        `evalkit.retrieval.executors.device_part`)."""
        self.__dict__.update(state)
        if not self.devices and self.backend == "torch":
            self.device = resolve_device()

    @property
    def texts_encoded(self) -> int:
        """Texts sent to the model in this process (for benchmarks)."""
        return self.vectors.encoded

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            try:
                kwargs = {} if Path(self.location).is_dir() else {"revision": self.revision}
                self._model = SentenceTransformer(self.location, device=self.device, **kwargs)
            except OSError as exc:
                raise MissingPrerequisite(f"cannot load model {self.location} ({exc})",
                                          "check the hub id or folder") from None
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def onnx(self):
        """The ONNX Runtime encoder (`evalkit.encoders.onnx`), built on first use."""
        if self._onnx is None:
            self._onnx = OnnxSentenceEncoder(self.location, self.cache_dir or cache_root(), self.max_seq_length,
                                             self.threads)
        return self._onnx

    def _process_pool(self):
        """A sentence-transformers multi-process pool over `devices` (several GPUs or CPU processes)."""
        if not self.devices or len(self.devices) < 2:
            return None
        if self._pool is None:
            self._pool = self.model.start_multi_process_pool(self.devices)
            atexit.register(self.model.stop_multi_process_pool, self._pool)
        return self._pool

    def compute(self, texts: Sequence[str]) -> np.ndarray:
        """The model's vectors of `texts`, in one call (no cache: `encode` goes through it)."""
        if self.backend == "onnx":
            return self.onnx.encode(list(texts), self.batch_size, self.normalize)
        return self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                 convert_to_numpy=True, pool=self._process_pool())

    def encode(self, texts: Sequence[str], desc: str = "texts") -> np.ndarray:
        """Vectors for `texts` in order; only texts never seen by this fingerprint reach the model."""
        return self.vectors.stack(list(texts), str, self.compute, f"encoding {desc} ({self.name}, {self.backend})")


