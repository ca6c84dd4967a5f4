"""Benchmark: one seed's explore page (`make explore SEED=...`) on a cold cache, then warm, in one run.

Cold: an empty embedding cache (``EVALKIT_CACHE``), run store (``RUNS_DIR``) and build folder
(``OUTPUT_DIR``), all in a temporary folder, with the default models (``EXPLORE_MODELS``:
BM25, all-MiniLM-L6-v2 and its instruction probe). Without stored runs over every query, the
page runs the seed's queries only and leaves the collection columns empty under a
"run `make relevance` first" line (`evalkit.pages.explore.load`). Warm: the same command again
(runs and vectors stored). With ``--full-runs``, the models' runs over every query (what
`make relevance` stores) are then made, untimed, and the page timed a third time: it reuses
them and shows every collection column. Reports wall seconds of each, the warm / cold ratio
and whether each page carries the "make relevance" line (aim: cold under 120 s).

    .venv/bin/python bench/bench_explore.py [--seed 929877] [--full-runs] [--workdir DIR] [--out FILE]

Timings on a shared machine are noisy; the ratio is taken within one run. make's own targets
must be up to date (it never reinstalls here: `.venv/.installed` newer than pyproject.toml).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

NOTE = "collection figures: run <code>make relevance</code> first"


def page(seed: str, work: Path, env: dict) -> tuple[float, Path]:
    """Wall seconds of `make explore` and the page it wrote."""
    start = time.perf_counter()
    done = subprocess.run(["make", "--no-print-directory", "explore", f"SEED={seed}", f"OUTPUT_DIR={work / 'build'}",
                           f"RUNS_DIR={work / 'runs'}"], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"make explore failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    pages = sorted((work / "build").glob(f"explore-{seed}*.html"), key=lambda p: p.stat().st_mtime)
    return seconds, pages[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", default="929877")
    parser.add_argument("--full-runs", action="store_true",
                        help="also make the models' runs over every query (untimed) and time the page that reuses them")
    parser.add_argument("--workdir", type=Path, help="an empty folder to work in (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        env = {**os.environ, "EVALKIT_CACHE": str(work / "cache"), "EVALKIT_PROGRESS": "off",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        cold, cold_page = page(args.seed, work, env)
        cold_marked = NOTE in cold_page.read_text()
        warm, warm_page = page(args.seed, work, env)
        report = {"cpu_cores": os.cpu_count(), "seed": args.seed, "cold_seconds": round(cold, 1),
                  "warm_seconds": round(warm, 1), "warm_over_cold": round(warm / cold, 3),
                  "aim_cold_seconds": 120, "cold_page_marks_collection_figures_missing": cold_marked,
                  "warm_page_marks_collection_figures_missing": NOTE in warm_page.read_text()}
        if args.full_runs:
            models = os.environ.get("EXPLORE_MODELS", "bm25,minilm,minilm-probe").split(",")
            code = ("import sys; from pathlib import Path; from evalkit.datasets import csfcube; "
                    "from evalkit.pipeline.runner import RunSettings, bind, obtain; "
                    "c = csfcube.to_collection(csfcube.load()); "
                    "[obtain(bind(RunSettings(model=m, dataset=c.name), c, Path(sys.argv[1]))) for m in sys.argv[2:]]")
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code, str(work / "runs"), *models], check=True, env=env, cwd=ROOT)
            report["full_runs_seconds"] = round(time.perf_counter() - start, 1)
            full, full_page = page(args.seed, work, env)
            report["with_full_runs_seconds"] = round(full, 1)
            report["with_full_runs_page_marks_collection_figures_missing"] = NOTE in full_page.read_text()
        report["load_average"] = os.getloadavg()[0]
    emit(report, args.out)


if __name__ == "__main__":
    main()
