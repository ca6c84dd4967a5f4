"""Benchmark: the driver's serial work per batch of a whole-corpus build, apart from any model (issue 47 item 3).

However many workers encode, one process (the driver) plans the batches and commits each into the
vector index in corpus order; its work per batch bounds the whole build's rate. Here the encoder is
model-free: it returns vectors of ``--dim`` dimensions (a precomputed block, rows cycled) as fast as
asked, so the time is the driver's alone: planning (hashing each model input), whatever the kit's
build does with a cache, converting, checksumming and writing the rows (with ``fsync``) and
``meta.json``. The build goes through the kit's one path for an embedding model
(`BiEncoder.corpus_index`), so the same script measures any revision of the kit (run it from
another checkout with ``PYTHONPATH`` pointing there: that is how the before/after figures of
issue 47 were made).

Per configuration: seconds per batch of `vector_index.BATCH` documents and documents per second;
the goal of issue 47 is at least 10,000 documents a second at 4,096 dimensions (32 GPUs at 300 a
second each).

    .venv/bin/python bench/bench_driver.py [--dim 4096] [--batches 6] [--workdir DIR] [--out FILE]

It prints one JSON report (bench/common.emit).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402


class Instant:
    """A model-free encoder with `BiEncoder`'s interface: ``compute`` (the model alone) and ``encode``
    (through the kit's embedding cache), each returning rows of a precomputed block of `dim`
    dimensions. ``seconds`` is the time spent inside the model (the copy of the block), which the
    report takes out of the driver's."""

    location, revision = "instant", "1"

    def __init__(self, dim: int, cache: Path):
        import numpy as np

        from evalkit.retrieval.embeddings import CachedVectors

        block = np.random.default_rng(0).standard_normal((4096, dim)).astype(np.float32)
        self.block = block / np.linalg.norm(block, axis=1, keepdims=True)
        self.vectors = CachedVectors({"model": f"instant-{dim}"}, cache)
        self.fingerprint = self.vectors.fingerprint
        self.seconds = 0.0

    def compute(self, texts):
        import numpy as np

        start = time.perf_counter()
        rows = np.resize(self.block, (len(texts), self.block.shape[1]))
        self.seconds += time.perf_counter() - start
        return rows

    def encode(self, texts, desc: str = "texts"):
        return self.vectors.stack(list(texts), str, self.compute)


def measure(dim: int, batches: int, work: Path) -> dict:
    from evalkit.data.collection import Document
    from evalkit.models.dense import BiEncoder
    from evalkit.retrieval import vector_index
    from evalkit.retrieval.corpus import Corpus

    size = vector_index.BATCH
    docs = [Document(f"p{i:07d}", f"title {i}", f"abstract number {i} " * 20) for i in range(size * batches)]
    os.environ["EVALKIT_CACHE"] = str(work / f"cache-{dim}")
    encoder = Instant(dim, work / f"cache-{dim}")
    scorer = BiEncoder(encoder, doc_template="{title} {abstract}")
    start = time.perf_counter()
    scorer.corpus_index(Corpus.of_documents(docs))
    wall = time.perf_counter() - start
    driver = wall - encoder.seconds
    shutil.rmtree(work / f"cache-{dim}", ignore_errors=True)
    return {"dim": dim, "batch": size, "batches": batches, "wall_s": round(wall, 2),
            "model_s": round(encoder.seconds, 2), "driver_s_per_batch": round(driver / batches, 3),
            "driver_docs_per_s": round(size * batches / driver, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dim", default="32,384,1024,4096", help="comma-separated vector widths")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--workdir", type=Path, help="kept after the run (default: a temporary folder)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("EVALKIT_PROGRESS", "off")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-driver-"))
    work.mkdir(parents=True, exist_ok=True)
    import evalkit

    rows = [measure(int(d), args.batches, work) for d in args.dim.split(",") if d.strip()]
    emit({"kit": str(Path(evalkit.__file__).parent.parent), "cores": os.cpu_count(), "rows": rows,
          "load_average": os.getloadavg()}, args.out)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
