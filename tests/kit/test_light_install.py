"""A light install (``pip install evalkit``, no extras) evaluates runs and judgments, compares runs
with a paired test and exports CSFCube without any model library; asking it to rank with a model
is one line naming the extra to install (`evalkit.core.extras`). The child process here cannot
import the ``models`` extra's libraries (an import hook refuses them, as a missing package would)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.core import extras

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parents[2]
# the models extra's distributions and the modules the kit imports from them
DISTRIBUTIONS = {"torch": "torch", "transformers": "transformers", "sentence-transformers": "sentence_transformers",
                 "bm25s": "bm25s", "pystemmer": "Stemmer", "pot": "ot"}
WITHOUT_MODELS = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from evalkit import cli
sys.exit(cli.main(sys.argv[2:]))
"""


def _name(requirement: str) -> str:
    return re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0].lower()


def test_the_core_dependencies_hold_no_model_library_and_the_models_extra_brings_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    assert core & set(DISTRIBUTIONS) == set()
    assert {_name(r) for r in project["optional-dependencies"]["models"]} >= set(DISTRIBUTIONS)
    assert set(extras.EXTRAS["models"]) == set(DISTRIBUTIONS.values())
    assert any("evalkit[models]" in r or "models" in r for r in project["optional-dependencies"]["offline"]
               + project["optional-dependencies"]["study"])


def _kit(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "EVALKIT_CACHE": str(tmp_path / "cache"), "EVALKIT_PROGRESS": "off"}
    blocked = ",".join(sorted({*extras.EXTRAS["models"], "huggingface_hub"}))
    return subprocess.run([sys.executable, "-c", WITHOUT_MODELS, blocked, *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)


def _trec(path: Path, collection, seed: int) -> Path:
    draw = random.Random(seed)
    lines = [f"{q} Q0 {d} 0 {draw.random():.6f} r{seed}" for q in collection.queries for d in collection.candidates[q]
             if d != collection.exclude.get(q)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_without_the_model_libraries_runs_are_evaluated_compared_and_exported(collection, tmp_path):
    first, second = _trec(tmp_path / "first.trec", collection, 1), _trec(tmp_path / "second.trec", collection, 2)
    compared = _kit(["evaluate", "--dataset", "csfcube", "--runs", str(first), "--runs", str(second),
                     "--format", "rows"], tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "first" in compared.stdout and "second" in compared.stdout and "p_holm" in compared.stdout
    exported = _kit(["export", "--format", "trec", str(tmp_path / "exported")], tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert any((tmp_path / "exported").iterdir())


def test_without_the_model_libraries_a_model_run_is_one_line_naming_the_extra(tmp_path):
    ranked = _kit(["run", "--dataset", "csfcube", "--model", "bm25", "--runs-dir", str(tmp_path / "runs"),
                   "--seeds", "929877"], tmp_path)
    assert ranked.returncode == 2
    assert ranked.stderr.strip() == ("evalkit: error: model bm25 (family bm25) needs bm25s, which is not installed; "
                                     "fix: pip install 'evalkit[models]' (with the CPU build of torch first: "
                                     "pip install torch==2.13.0)")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("run.trec"))
