"""The package's layering (pyproject's [tool.importlinter] contract, run by `make test` as
``lint-imports``) and its import graph: the contract holds, it is not vacuous (an upward import
breaks it), and no module imports its way back to itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package under `root`, with the repository's contract."""
    command = Path(sys.executable).with_name("lint-imports")
    assert command.exists(), "lint-imports is missing: install the test extra (import-linter)"
    return subprocess.run([str(command), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "evalkit", tmp_path / "evalkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layers_contract_holds_and_breaks_on_an_upward_import(tmp_path):
    root = _copy(tmp_path)
    kept = _lint_imports(root)
    assert kept.returncode == 0 and "1 kept, 0 broken" in kept.stdout, kept.stdout + kept.stderr
    # a core module reaching up into the runner, inside a function (where imports hid circles before)
    with (root / "evalkit" / "data" / "collection.py").open("a") as file:
        file.write("\n\ndef _upward():\n    from evalkit.pipeline import runner\n\n    return runner\n")
    broken = _lint_imports(root)
    assert broken.returncode != 0 and "BROKEN" in broken.stdout, broken.stdout + broken.stderr
    assert "evalkit.data.collection -> evalkit.pipeline.runner" in broken.stdout


def test_no_import_circles():
    """No strongly connected component among the kit's modules: module- and function-level imports,
    and those under TYPE_CHECKING too (a circle for annotations only is still a circle: the module
    that is called names a small Protocol of what it reads, as `evalkit.llm.schedule` does)."""
    graph = grimp.build_graph("evalkit", exclude_type_checking_imports=False, cache_dir=None)
    imports = {m: {t for t in graph.find_modules_directly_imported_by(m) if t.startswith("evalkit")}
               for m in graph.modules}
    try:
        TopologicalSorter(imports).prepare()
    except CycleError as exc:
        raise AssertionError(f"an import circle through {', '.join(exc.args[1][:-1])}") from None


WHOLE_KIT = "kit"  # tests of the kit as a whole (layers, docs, notebooks, make, benchmarks, start-up)


def test_the_tests_mirror_the_package_tree():
    """Every test lives in tests/<part>/ named for the evalkit subpackage or top-level module it
    tests (or tests/kit/ for the kit as a whole); the shared helpers sit in tests/ itself."""
    parts = {p.stem if p.is_file() else p.name for p in (ROOT / "evalkit").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    folders = {p.parent.relative_to(ROOT / "tests").parts[0] for p in (ROOT / "tests").rglob("test_*.py")
               if p.parent != ROOT / "tests"}
    assert not sorted((ROOT / "tests").glob("test_*.py")), "a test file at the top of tests/: move it into its part"
    assert folders - parts - {WHOLE_KIT} == set(), "a tests/ folder that names no part of evalkit"
