"""Start-up cost: the command line loads the heavy libraries only on the code paths that use them.

Each check runs the CLI in a fresh interpreter (a child process, so nothing another test imported
counts) and reads `sys.modules` after the command: `--help`, `evaluate` of a run file and a BM25
run (made, then reused) must load none of the neural stack; only a reused run skips bm25s, whose
numba and scipy cost about a second of start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_datasets import write_beir

ROOT = Path(__file__).resolve().parents[2]
# the neural stack, the LLM backends and the study's plotting
NEURAL = ("torch", "ot", "sklearn", "faiss", "transformers", "sentence_transformers", "tokenizers",
          "safetensors", "huggingface_hub", "onnxruntime", "peft", "vllm", "openai", "llama_cpp", "matplotlib")
RANKING = ("bm25s", "numba", "Stemmer", "scipy")  # BM25's library and what it loads

# Runs the CLI's main() with the given arguments, then prints the top-level modules it loaded.
PROBE = """
import json, sys
from evalkit import cli
try:
    status = cli.main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print(json.dumps({"status": status, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def loaded(args: list[str], tmp_path: Path) -> set[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "EVALKIT_CACHE": str(tmp_path / "cache"), "EVALKIT_PROGRESS": "off"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] in (0, None), done.stderr
    return set(report["modules"])


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    return write_beir(tmp_path_factory.mktemp("beir") / "mini")


def test_help_loads_no_neural_or_ranking_library(tmp_path):
    assert loaded(["--help"], tmp_path) & {*NEURAL, *RANKING} == set()


def test_a_bm25_run_and_evaluate_load_no_neural_library(beir, tmp_path):
    run = ["run", "--dataset", f"beir:{beir}", "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]
    fresh = loaded(run, tmp_path)
    assert "bm25s" in fresh  # the probe sees what the command imports
    assert fresh & set(NEURAL) == set()
    assert loaded(run, tmp_path) & {*NEURAL, *RANKING} == set()  # reused: nothing is ranked
    trec = next((tmp_path / "runs").rglob("run.trec"))
    for runs in (trec, trec.parent):  # a run file, a run-store folder
        evaluate = ["evaluate", "--dataset", f"beir:{beir}", "--runs", str(runs)]
        assert loaded(evaluate, tmp_path) & {*NEURAL, *RANKING} == set()
