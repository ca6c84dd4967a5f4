"""Benchmark: a reused run against the CLI's start-up, as processes, in one run.

On the SciFact-sized synthetic BEIR folder of `bench_retrieval.py` (5,183 documents, 310
queries; a run of 310 x 1,000 lines), BM25's run is made once (untimed), then, interleaved
``--repeat`` times, the wall time of

- ``evalkit --help`` (the CLI's start-up: Python, the kit's imports, argparse);
- ``evalkit run`` answering from the stored run (sidecar and sha256 checked, nothing ranked);
- ``evalkit evaluate --runs FOLDER`` of the same run (the run parsed and scored);

and the ratio of the medians, reused run / help (aim: at most 3). It then edits one score of the
stored ranking (still a valid TREC file) and checks that ``evalkit run`` refuses it and makes
the run again (the file comes back byte for byte): the verification the speed must not cost.
Timings on a shared machine are noisy; the ratio is taken within one run.

    .venv/bin/python bench/bench_reuse.py [--repeat 5] [--workdir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
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


def evalkit(*args: str, env: dict) -> float:
    """Wall seconds of one `evalkit` process (its own interpreter, as a user runs it)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evalkit.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"evalkit {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, help="keep the data and runs here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        beir, runs_dir = work / "scifact-sized", work / "runs"
        if not (beir / "corpus.jsonl").is_file():
            write_beir(beir, *SCIFACT)
        env = {**os.environ, "EVALKIT_CACHE": str(work / "cache"), "EVALKIT_PROGRESS": "off",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        run = ["run", "--dataset", f"beir:{beir}", "--model", "bm25", "--runs-dir", str(runs_dir)]
        first = evalkit(*run, env=env)
        folder = next(runs_dir.rglob("run.trec")).parent
        evaluate = ["evaluate", "--dataset", f"beir:{beir}", "--runs", str(folder)]
        times: dict[str, list[float]] = {"help": [], "reused_run": [], "evaluate": []}
        for _ in range(args.repeat):
            times["help"].append(evalkit("--help", env=env))
            times["reused_run"].append(evalkit(*run, env=env))
            times["evaluate"].append(evalkit(*evaluate, env=env))
        median = {name: statistics.median(values) for name, values in times.items()}

        ranking = folder / "run.trec"
        stored = ranking.read_bytes()
        head, rest = stored.split(b"\n", 1)
        fields = head.split()
        fields[4] = repr(float(fields[4]) + 1.0).encode()
        ranking.write_bytes(b" ".join(fields) + b"\n" + rest)
        remade = evalkit(*run, env=env)
        refused = ranking.read_bytes() == stored

    report = {
        "cpu_cores": os.cpu_count(), "load_average": os.getloadavg()[0], "repeat": args.repeat,
        "run_lines": stored.count(b"\n"), "first_run_seconds": round(first, 3),
        "median_seconds": {k: round(v, 3) for k, v in median.items()},
        "reused_run_over_help": round(median["reused_run"] / median["help"], 2),
        "evaluate_over_help": round(median["evaluate"] / median["help"], 2),
        "aim_reused_over_help": 3.0,
        "tampered_run_refused_and_remade": refused, "remade_seconds": round(remade, 3),
    }
    emit(report, args.out)
    if not refused:
        sys.exit("the edited stored run was reused: the verification failed")


if __name__ == "__main__":
    main()
