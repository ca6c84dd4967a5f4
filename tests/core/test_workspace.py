"""One cache and one set of output folders for the CLI, make, the API and notebooks started from
JupyterLab or nbconvert inside notebooks/ (evalkit.core.workspace): nothing is written under notebooks/."""

from __future__ import annotations

from pathlib import Path

from evalkit.core import workspace
from evalkit.study import params

ROOT = Path(__file__).resolve().parents[2]


def test_a_notebook_kernel_in_notebooks_resolves_to_the_checkout(monkeypatch):
    monkeypatch.chdir(ROOT / "notebooks")  # where JupyterLab and nbconvert start a notebook's kernel
    monkeypatch.delenv("EVALKIT_CACHE", raising=False)
    study = params.check("summary", PROFILE="offline", PROTOCOL="pool")
    assert workspace.checkout() == ROOT
    assert study.tables_dir == ROOT / "build" / "tables" and study.figures_dir == ROOT / "figures"
    assert study.runs_dir == ROOT / "runs" and workspace.cache_root() == ROOT / "cache"


def test_absolute_folders_and_evalkit_cache_are_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "c"))
    study = params.check("summary", PROFILE="offline", PROTOCOL="pool", OUTPUT_DIR=str(tmp_path / "b"))
    assert study.tables_dir == tmp_path / "b" / "tables" and workspace.cache_root() == tmp_path / "c"
