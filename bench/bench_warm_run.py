"""Benchmark: a warm `evalkit run` of a dense model against bare sentence-transformers + FAISS, as
processes, in one run.

On the SciFact-sized synthetic BEIR folder of `bench_retrieval.py` (5,183 documents, 310
queries), all-MiniLM-L6-v2 (``--model``, the offline profile's) ranks the corpus once, untimed,
so that its corpus vectors are in the embedding cache and its vector index is built. Then,
``--repeat`` times:

- kit: ``evalkit run --model minilm --prompt P`` with a prompt never used before (a new query
  text for each of the 310 queries: they are encoded, the corpus vectors come from the cache,
  one index search, the run written and verified);
- bare: a fresh ``python`` that imports sentence-transformers and FAISS, loads the same model
  folder, encodes the same 310 query texts (prompt appended) and searches a FAISS
  ``IndexFlatIP`` of 5,183 unit vectors of the model's dimension for the top 1,000 (random
  vectors: a flat search costs the same whatever their values; the corpus encoding is the
  untimed part of both), its parts timed inside the process too.

It reports the medians, the kit / bare ratio of the process wall times, and the kit's time
beyond the bare process. Timings on a shared machine are noisy; the ratio is taken within one run.

    .venv/bin/python bench/bench_warm_run.py [--repeat 3] [--model minilm] [--docs 5183] [--doc-words N]
        [--workdir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_retrieval import SCIFACT, write_beir  # noqa: E402
from common import emit  # noqa: E402

# The bare reference: one process, as a user would write it without the kit.
BARE = r"""
import json, sys, time
start = time.perf_counter()
import faiss, numpy as np
from sentence_transformers import SentenceTransformer
imported = time.perf_counter()
folder, queries_file, prompt, docs, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
texts = [json.loads(line)["text"] + prompt for line in open(queries_file, encoding="utf-8")]
model = SentenceTransformer(folder, device="cpu")
loaded = time.perf_counter()
queries = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
encoded = time.perf_counter()
vectors = np.random.default_rng(0).standard_normal((docs, queries.shape[1]), dtype=np.float32)
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
index = faiss.IndexFlatIP(queries.shape[1])
index.add(vectors)
built = time.perf_counter()
scores, ids = index.search(queries, k)
searched = time.perf_counter()
print(json.dumps({"import": imported - start, "model_load": loaded - imported, "encode_queries": encoded - loaded,
                  "index_add": built - encoded, "search": searched - built}))
"""


def timed(command: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} ... failed: {done.stderr.strip()[-1500:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="minilm", help="a dense model of the offline profile")
    parser.add_argument("--docs", type=int, default=SCIFACT[0],
                        help="corpus size (default SciFact's; fewer makes the untimed cold encoding shorter)")
    parser.add_argument("--doc-words", type=int,
                        help="cut each document to its first N words (the untimed cold encoding is shorter; the warm "
                             "run reads every vector from the cache whatever the length)")
    parser.add_argument("--workdir", type=Path, help="keep the data, cache and runs here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from evalkit.models import registry
    from evalkit.models.locations import resolve_location

    folder = resolve_location(registry.spec(args.model, "offline").settings["model"])
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        beir, runs_dir = work / f"synthetic-{args.docs}-{args.doc_words or 'all'}", work / "runs"
        if not (beir / "corpus.jsonl").is_file():
            write_beir(beir, args.docs, SCIFACT[1])
            if args.doc_words:
                corpus = [json.loads(line) for line in (beir / "corpus.jsonl").open(encoding="utf-8")]
                (beir / "corpus.jsonl").write_text("".join(
                    json.dumps({**d, "text": " ".join(d["text"].split()[:args.doc_words])}) + "\n" for d in corpus))
        env = {**os.environ, "EVALKIT_CACHE": str(work / "cache"), "EVALKIT_PROGRESS": "off",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        run = [sys.executable, "-m", "evalkit.cli", "run", "--dataset", f"beir:{beir}", "--model", args.model,
               "--runs-dir", str(runs_dir)]
        setup, _ = timed(run, env)  # the corpus vectors and the index: the untimed part
        kit, bare, parts = [], [], []
        stamp = time.time_ns()
        for i in range(args.repeat):
            prompt = f" Find documents on this, attempt {stamp}-{i}."  # never seen: every query encoded anew
            kit.append(timed([*run, "--prompt", prompt], env)[0])
            seconds, out = timed([sys.executable, "-c", BARE, folder, str(beir / "queries.jsonl"), " " + prompt,
                                  str(args.docs), "1000"], env)
            bare.append(seconds)
            parts.append(json.loads(out.strip().splitlines()[-1]))
    kit_s, bare_s = statistics.median(kit), statistics.median(bare)
    report = {
        "cpu_cores": os.cpu_count(), "load_average": os.getloadavg()[0], "model": args.model,
        "documents": args.docs, "doc_words": args.doc_words or "all", "queries": SCIFACT[1], "k": 1000,
        "repeat": args.repeat,
        "setup_seconds_cold_run": round(setup, 1),
        "kit_warm_run_seconds": round(kit_s, 2), "bare_process_seconds": round(bare_s, 2),
        "kit_over_bare": round(kit_s / bare_s, 2), "kit_beyond_bare_seconds": round(kit_s - bare_s, 2),
        "bare_parts_median_seconds": {k: round(statistics.median(p[k] for p in parts), 3) for k in parts[0]},
    }
    emit(report, args.out)


if __name__ == "__main__":
    main()
