"""Benchmark: the full protocol's first stage at the release's scale, simulated.

Builds a synthetic corpus of ``--papers`` (default 800,000) papers in the format of
``abstracts-preds.zip`` (one .jsonl in a zip; paper_id, title, abstract as a list of
sentences, pred_labels), then runs the kit's first stage of the full protocol as it is
today (`evalkit.pipeline.runner.candidates_for` with ``protocol="full"``: stream, encode through the
embedding cache into the on-disk vector index of `evalkit.retrieval.vector_index`, its exact blocked search,
second pass for the texts) for CSFCube's 50 queries with a
tiny encoder (tests/tiny_models.py: a 2-layer, 32-dim BERT), each run in a child process:

1. a run SIGKILLed once ``--kill-at`` of the papers are in the cache, then a rerun: texts
   the rerun sends to the model must be exactly the papers (and queries) the killed run had
   not committed: no paper is encoded twice (exit status 1 otherwise); the embedding cache's
   size on disk, the rerun's wall time and peak resident memory (the child's ru_maxrss);
2. unless ``--no-cold``, an uninterrupted cold run: wall time, peak memory, papers per second.

    .venv/bin/python bench/bench_full_corpus.py [--papers 800000] [--kill-at 0.5] [--no-cold] [--workdir DIR]
        [--out FILE]

It prints one JSON report (bench/common.emit). Scaling to SciNCL on a GPU: see the README.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny encoder lives there
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402

LABELS = ("background_label", "method_label", "result_label", "objective_label", "other_label")


def build_corpus(path: Path, papers: int, seed: int = 0) -> None:
    """`papers` synthetic papers (6 sentences of 14 words on average) in the release's format."""
    from tiny_models import WORDS

    rng = random.Random(seed)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("abstracts-preds.jsonl", "w", force_zip64=True) as out:
            lines = []
            for i in range(papers):
                sentences = [" ".join(rng.choices(WORDS, k=rng.randint(8, 20))) + "." for _ in range(rng.randint(4, 8))]
                lines.append(json.dumps({"paper_id": str(100_000_000 + i), "title": " ".join(rng.choices(WORDS, k=8)),
                                         "abstract": sentences,
                                         "pred_labels": [rng.choice(LABELS) for _ in sentences]}))
                if len(lines) == 10_000:
                    out.write(("\n".join(lines) + "\n").encode())
                    lines = []
            if lines:
                out.write(("\n".join(lines) + "\n").encode())


def write_registry(path: Path, model: Path) -> None:
    import yaml

    entry = {"family": "dense", "model": str(model), "label": "tiny encoder", "role": "agnostic", "batch_size": 256}
    path.write_text(yaml.safe_dump({"profiles": {"bench": {"first_stage": "tiny", "depth": 200,
                                                           "models": {"tiny": entry}}}}))


def cached_vectors(cache: Path) -> int:
    total = 0
    for db in (cache / "embeddings").glob("*.sqlite"):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                total += conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        except sqlite3.Error:
            pass
    return total


def cache_bytes(cache: Path) -> int:
    return sum(p.stat().st_size for p in (cache / "embeddings").glob("*") if p.is_file())


def child(corpus: Path) -> None:
    """One first-stage run of the full protocol; prints a JSON line of its figures."""
    from evalkit.datasets import csfcube
    from evalkit.pipeline.runner import RunSettings, bind, candidates_for
    from evalkit.retrieval import embeddings

    made = []
    original = embeddings.CachedVectors.__init__

    def counting(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    embeddings.CachedVectors.__init__ = counting  # counts the texts each cache sends to the model
    collection = csfcube.load_collection()
    settings = RunSettings(model="tiny", profile="bench", protocol="full", corpus=str(corpus))
    start = time.perf_counter()
    bound = bind(settings, collection, None)  # the run as the runner binds it, stored nowhere
    chosen, described = candidates_for(bound.settings, bound.collection, bound.queries, bound.first_stage, bound.depth)
    wall = time.perf_counter() - start
    print(json.dumps({"wall_s": round(wall, 1), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                                                     / 1024, 1),
                      "encoded": sum(c.encoded for c in made), "queries": len(chosen),
                      "corpus_size": described["corpus_size"],
                      "depth": min(len(c) for c in chosen.values())}), flush=True)


def run_child(corpus: Path, env: dict, kill_at: int | None = None) -> dict | None:
    command = [sys.executable, __file__, "--child", str(corpus)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    if kill_at is None:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"first-stage run failed (status {process.returncode})")
        return json.loads(out.strip().splitlines()[-1])
    cache = Path(env["EVALKIT_CACHE"])
    while process.poll() is None and cached_vectors(cache) < kill_at:
        time.sleep(1.0)
    if process.poll() is not None:
        raise SystemExit("the run finished before it could be killed; lower --kill-at")
    process.send_signal(signal.SIGKILL)
    process.wait()
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=800_000)
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of the papers cached when the run is killed")
    parser.add_argument("--workdir", type=Path, help="keep the corpus and caches here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    parser.add_argument("--no-cold", action="store_true",
                        help="skip the uninterrupted run (the killed run and its rerun still encode every paper once)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    from tiny_models import build_sentence_transformer

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-full-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "abstracts-preds.zip"
    start = time.perf_counter()
    if not corpus.is_file():
        build_corpus(corpus, args.papers)
    built_s = time.perf_counter() - start
    model = build_sentence_transformer(work / "model") if not (work / "model" / "tiny-st").is_dir() \
        else work / "model" / "tiny-st"
    write_registry(work / "models.yaml", model)
    env = {**os.environ, "EVALKIT_MODELS": str(work / "models.yaml"), "EVALKIT_PROGRESS": "off",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    report = {"benchmark": "full protocol first stage, simulated", "papers": args.papers,
              "corpus_zip_mb": round(corpus.stat().st_size / 2**20, 1), "corpus_build_s": round(built_s, 1),
              "encoder": "tiny BERT (2 layers, 32 dims, 64 tokens), CPU", "cpus": os.cpu_count()}
    print(json.dumps(report), file=sys.stderr, flush=True)
    kill_cache = work / "cache-kill"
    shutil.rmtree(kill_cache, ignore_errors=True)
    kill_env = {**env, "EVALKIT_CACHE": str(kill_cache)}
    started = time.perf_counter()
    run_child(corpus, kill_env, kill_at=int(args.kill_at * args.papers))
    report["killed_after_s"] = round(time.perf_counter() - started, 1)
    report["killed_with_cached"] = at_kill = cached_vectors(kill_cache)
    print(json.dumps(report), file=sys.stderr, flush=True)
    resumed = report["resumed"] = run_child(corpus, kill_env)
    total = report["cached_vectors"] = cached_vectors(kill_cache)
    report["encoded_twice"] = resumed["encoded"] - (total - at_kill)
    report["cache_mb"] = round(cache_bytes(kill_cache) / 2**20, 1)
    report["bytes_per_vector_in_cache"] = round(cache_bytes(kill_cache) / max(total, 1), 1)
    print(json.dumps(report), file=sys.stderr, flush=True)
    shutil.rmtree(kill_cache, ignore_errors=True)
    if not args.no_cold:
        cold_cache = work / "cache-cold"
        shutil.rmtree(cold_cache, ignore_errors=True)
        cold = report["cold"] = run_child(corpus, {**env, "EVALKIT_CACHE": str(cold_cache)})
        report["papers_per_s"] = round(args.papers / cold["wall_s"], 1)
        shutil.rmtree(cold_cache, ignore_errors=True)
    emit(report, args.out)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if report["encoded_twice"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
