"""Benchmark: a whole corpus encoded and searched in-process vs on a local Ray cluster (issue 39).

A synthetic corpus of ``--docs`` short documents (default 50,000; 8-20 words each) is ranked for
50 queries (top 100) with a tiny local encoder (tests/tiny_models.py: a 2-layer, 32-dim BERT),
through the kit's one path (`evalkit.retrieval.corpus.rank_corpus`: the on-disk vector index, its
exact search), once per configuration, each in a child process with a fresh cache:

- ``local``: the in-process executor;
- ``ray-N`` for each N of ``--workers`` (default 1,2): a local Ray cluster of N workers.

Per configuration: wall time, documents per second, the driver's peak resident memory (the
child's ru_maxrss; the workers' memory is not in it) and, for Ray, its fixed start cost (the
cluster started and the workers ready, before the first batch). Every configuration's ranking
must equal the in-process one (exit status 1 otherwise). On this 2-core machine Ray's workers
share the cores with the driver: the ratio says what the executor costs, not what a cluster gains.

Then an estimate for CSFCube's 800k abstracts under GritLM-7B on 1, 8 and 32 GPUs: the per-GPU
rate of `evalkit/config/costs.yaml` (``rates.encode_per_s.gpu.large``) times the workers, plus the
measured fixed start cost, bounded by the driver's measured commit rate (the in-process run's
documents per second with the encoding taken out).

    .venv/bin/python bench/bench_cluster.py [--docs 50000] [--workers 1,2] [--workdir DIR] [--out FILE]

It prints a table and one JSON report (bench/common.emit).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny encoder lives there
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402

QUERIES, TOP = 50, 100
CORPUS_PAPERS, GPUS = 800_000, (1, 8, 32)


def documents(count: int, seed: int = 0):
    from tiny_models import WORDS

    from evalkit.data.collection import Document

    rng = random.Random(seed)
    return [Document(f"p{i:07d}", "", " ".join(rng.choices(WORDS, k=rng.randint(8, 20)))) for i in range(count)]


def child(model: str, docs: int, executor: str, workers: int, out: str, encode: bool) -> None:
    """One configuration, in this (child) process: the report as JSON in `out`."""
    import numpy as np

    from evalkit.data.collection import Query
    from evalkit.models.dense import BiEncoder
    from evalkit.retrieval.corpus import Corpus, rank_corpus
    from evalkit.retrieval.embeddings import Encoder
    from evalkit.retrieval.executors import IN_PROCESS

    corpus = Corpus.of_documents(documents(docs))
    queries = [Query(f"q{j}", d.text) for j, d in enumerate(documents(QUERIES, seed=1))]
    scorer = BiEncoder(Encoder(model))
    if not encode:  # the driver's own work (index commits, search): vectors from a table, no model
        table = np.random.default_rng(0).standard_normal((docs, 32)).astype(np.float32)
        scorer.index_vectors = lambda batch: table[[int(d.doc_id[1:]) for d in batch]]
    start = time.perf_counter()
    startup = None
    if executor == "ray":
        from evalkit.retrieval.ray_executor import RayExecutor

        runner = RayExecutor(workers)
        runner._workers(scorer.index_vectors)  # the cluster and its workers, timed alone
        startup = time.perf_counter() - start
    else:
        runner = IN_PROCESS
    with runner:
        found = rank_corpus(scorer, queries, corpus, TOP, executor=runner)
    wall = time.perf_counter() - start
    digest = json.dumps({q: list(s.items()) for q, s in sorted(found.items())})
    Path(out).write_text(json.dumps({
        "wall_s": round(wall, 2), "docs_per_s": round(docs / wall, 1), "start_s": None if startup is None else
        round(startup, 2), "driver_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ranking": digest}))


def run_child(work: Path, name: str, model: Path, docs: int, executor: str, workers: int, encode: bool = True):
    out = work / f"{name}.json"
    env = {**os.environ, "EVALKIT_CACHE": str(work / f"cache-{name}"), "EVALKIT_PROGRESS": "off",
           "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    subprocess.run([sys.executable, __file__, "--child", json.dumps([str(model), docs, executor, workers, str(out),
                                                                    encode])], check=True, env=env)
    return json.loads(out.read_text())


def estimate(local: dict, driver: dict, start_s: float) -> list[dict]:
    from evalkit.pipeline.prerequisites import costs

    per_gpu = costs()["rates"]["encode_per_s"]["gpu"]["large"]
    ceiling = driver["docs_per_s"]  # what the driver can commit and search per second, encoding aside
    rows = []
    for gpus in GPUS:
        rate = min(per_gpu * gpus, ceiling)
        hours = (start_s + CORPUS_PAPERS / rate) / 3600
        rows.append({"gpus": gpus, "docs_per_s": round(rate, 1), "hours": round(hours, 2),
                     "gpu_hours": round(hours * gpus, 2), "bound": "driver" if rate == ceiling else "GPUs"})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--workers", default="1,2", help="comma-separated Ray worker counts")
    parser.add_argument("--workdir", type=Path, help="kept after the run (default: a temporary folder)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*json.loads(args.child))
        return 0
    from tiny_models import build_sentence_transformer

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    model = build_sentence_transformer(work / "model")
    results = {"local": run_child(work, "local", model, args.docs, "local", 0)}
    for workers in (int(w) for w in args.workers.split(",") if w.strip()):
        results[f"ray-{workers}"] = run_child(work, f"ray-{workers}", model, args.docs, "ray", workers)
    driver = run_child(work, "driver-only", model, args.docs, "local", 0, encode=False)
    want = results["local"].pop("ranking")
    driver.pop("ranking")
    same = True
    for name, found in results.items():
        if name != "local":
            found["same_ranking"] = found.pop("ranking") == want
            same &= found["same_ranking"]
            found["ratio_to_local"] = round(found["wall_s"] / results["local"]["wall_s"], 2)
    starts = [r["start_s"] for r in results.values() if r.get("start_s") is not None]
    print(f"{'config':<10} {'wall s':>8} {'docs/s':>9} {'start s':>8} {'driver MB':>10} {'x local':>8}")
    for name, r in results.items():
        print(f"{name:<10} {r['wall_s']:>8} {r['docs_per_s']:>9} {r.get('start_s') or '':>8} "
              f"{r['driver_peak_mb']:>10} {r.get('ratio_to_local', 1.0):>8}")
    report = {"docs": args.docs, "cores": os.cpu_count(), "configs": results, "driver_only": driver,
              "estimate_800k_gritlm_7b": estimate(results["local"], driver, max(starts, default=0.0)),
              "load_average": os.getloadavg()}
    emit(report, args.out)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
