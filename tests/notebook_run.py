"""The study notebooks run under papermill as make runs them, for the tests: the smoke seeds, the
models each notebook runs, and the parameter contract (tests/kit/test_notebooks.py,
tests/models/test_paper_profile.py)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import papermill

from evalkit.study import params

ROOT = Path(__file__).resolve().parents[1]
SEEDS = "929877,3264891,1936997,11844559"
TAG = params.build_tag("offline", "pool", SEEDS)
MODELS = {"relevance": "bm25,minilm,minilm-probe", "instruction_following": "bm25,minilm,minilm-probe",
          "sensitivity": "minilm-probe", "hybrid": "minilm", "promptriever": "minilm"}
CONTRACT = {"PROFILE", "PROTOCOL", "CORPUS", "MODELS", "REFERENCE_MODEL", "DISCOUNT", "SEEDS", "OUTPUT_DIR",
            "FIGURES_DIR", "RUNS_DIR", "TAG", "INSTRUCTIONS", "OFFICIAL"}
STUDY = ("relevance", "instruction_following", "sensitivity", "hybrid", "summary")


def parameters(name: str) -> list[str]:
    """The names a notebook's parameters cell declares."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    return re.findall(r"^([A-Z_]+) =", cell.source, flags=re.M)


def execute(name: str, workspace: Path, out: str | None = None, source: Path | None = None, **overrides) -> Path:
    """Run notebooks/NAME.ipynb (or `source`, an edited copy of it) on the smoke seeds as make would."""
    declared = parameters(name)
    given = {"PROFILE": "offline", "PROTOCOL": "pool", "SEEDS": SEEDS, "MODELS": MODELS.get(name, ""),
             "OUTPUT_DIR": str(workspace / "build"), "FIGURES_DIR": str(workspace / "figures"),
             "RUNS_DIR": str(workspace / "runs"), **overrides}
    # one tag for every notebook of a study, as make passes it
    given.setdefault("TAG", params.build_tag(given["PROFILE"], given["PROTOCOL"], given["SEEDS"]))
    path = workspace / f"{out or name}.ipynb"
    papermill.execute_notebook(str(source or ROOT / "notebooks" / f"{name}.ipynb"), str(path), progress_bar=False,
                               parameters={k: v for k, v in given.items() if k in declared}, cwd=str(ROOT))
    return path


def write_notebook(root: Path, name: str, body: str, parameters: str = 'OUTPUT_DIR = "build"') -> Path:
    """A two-cell notebook ``root/notebooks/NAME.ipynb`` for the launcher tests: a parameters cell
    holding `parameters`, then `body`; its path."""
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(parameters)
    cell.metadata["tags"] = ["parameters"]
    notebook.cells = [cell, nbformat.v4.new_code_cell(body)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "notebooks" / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path
