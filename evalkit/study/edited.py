"""An edited notebook is a different study: its outputs carry ``-edited-HASH`` in their tag.

The kit's notebooks are recorded in `MANIFEST` (the sha256 of each code cell, the parameters
cells aside). Two places compare against it:

- make (`evalkit.study.tag`, `evalkit.make.launch`): the notebook files under ``notebooks/``;
  when one differs from the record, the build tag of every notebook gets ``-edited-HASH`` (a
  digest of the edited notebooks' code), so the study's tables, the summary and the report of
  an edited study never replace the kit's;
- a notebook run by papermill directly or in JupyterLab (`evalkit.study.params.Study.name`): the
  cells the kernel has executed so far; when they are not the kit's cells in the kit's order, the
  outputs named after that get ``-edited-HASH`` of the executed code (a cell run twice counts as
  an edit: the kit cannot know it changed nothing).

Parameters cells (papermill's injected one included) are assignments of constants to upper-case
names and are never part of the code compared. After changing a notebook of the kit itself, record
it: ``python3 -m evalkit.study.edited --record`` (a test checks the record is current).

Standard library only: the Makefile runs `evalkit.study.tag` with the system Python.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from evalkit.core.names import digest

MANIFEST = Path(__file__).resolve().parents[1] / "manifests" / "notebooks.json"
MARK = "-edited-"


def is_parameters(source: str) -> bool:
    """Whether a cell only assigns constants to upper-case names (a parameters cell, papermill's
    injected one included); an empty cell counts as one (it runs nothing)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return all(isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
               and _constant(node.value) for node in body)


def _constant(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def code_of(sources: Iterable[str]) -> list[str]:
    """The code compared: each cell stripped, parameters and empty cells left out."""
    return [s.strip() for s in sources if s.strip() and not is_parameters(s)]


def cell_hashes(cells: Sequence[str]) -> list[str]:
    return [hashlib.sha256(c.encode()).hexdigest() for c in cells]


def notebook_code(path: Path) -> list[str]:
    """The compared code cells of a notebook file (JSON read with the standard library)."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    return code_of("".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
                   for c in notebook.get("cells", []) if c.get("cell_type") == "code"
                   and "parameters" not in c.get("metadata", {}).get("tags", []))


def recorded() -> dict[str, list[str]]:
    """notebook name -> the sha256 of each of its code cells, as the kit ships it."""
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def edited_notebooks(folder: Path) -> dict[str, str]:
    """name -> digest of its code, for each kit notebook under `folder` whose code is not the kit's."""
    kit = recorded()
    out = {}
    for name, hashes in sorted(kit.items()):
        path = Path(folder) / f"{name}.ipynb"
        if path.is_file():
            cells = notebook_code(path)
            if cell_hashes(cells) != hashes:
                out[name] = digest("\n".join(cells))
    return out


def edited_part(folder: Path) -> str:
    """``-edited-HASH`` when any kit notebook under `folder` is edited (one part for the whole build,
    whose notebooks share a tag), else ""."""
    edited = edited_notebooks(folder)
    return f"{MARK}{digest(chr(10).join(f'{n}={h}' for n, h in edited.items()))}" if edited else ""


def history_part(notebook: str, history: Sequence[str]) -> str:
    """``-edited-HASH`` when the cells a kernel executed (`history`, IPython's ``In``) are not the first
    cells of the kit's `notebook` in order, else "". A notebook the kit does not ship is edited."""
    cells = code_of(history)
    kit = recorded().get(notebook)
    if kit is not None and cell_hashes(cells) == kit[:len(cells)]:
        return ""
    return f"{MARK}{digest(chr(10).join(cells))}"


def record(folder: Path) -> dict[str, list[str]]:
    """The manifest of the notebooks under `folder` (every ``*.ipynb``), written to `MANIFEST`."""
    found = {p.stem: cell_hashes(notebook_code(p)) for p in sorted(Path(folder).glob("*.ipynb"))}
    MANIFEST.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return found


def main(argv: list[str]) -> int:
    if argv != ["--record"]:
        print("usage: python3 -m evalkit.study.edited --record   (after changing a notebook of the kit)",
              file=sys.stderr)
        return 2
    print(f"recorded {', '.join(record(Path('notebooks')))} in {MANIFEST.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
