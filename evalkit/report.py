"""The HTML report: the executed study notebooks merged into one page (`evalkit report`).

Every notebook is read and checked before anything is written; a smoke notebook (one
executed with SEEDS, or named ``*-smoke-*``) goes into a report only when asked
(``evalkit report --smoke``), so a smoke result never passes for the full study.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import KitError
from evalkit.runs import write_atomic


def read_notebook(path: Path):
    """An executed notebook, or a one-line KitError for a missing, folder, garbage or non-notebook file."""
    import nbformat

    path = Path(path)
    if path.is_dir():
        raise KitError(f"{path}: is a folder, not a notebook; give executed .ipynb files")
    if not path.is_file():
        raise KitError(f"{path}: no such notebook; give executed .ipynb files")
    try:
        notebook = nbformat.read(str(path), as_version=4)
    except (ValueError, RecursionError, UnicodeDecodeError, KeyError, TypeError, AttributeError,
            nbformat.ValidationError) as exc:
        first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise KitError(f"{path}: not a readable .ipynb notebook ({first[:200]}); give executed notebooks") from None
    if not isinstance(getattr(notebook, "cells", None), list):
        raise KitError(f"{path}: not a notebook (no cells); give executed .ipynb files")
    return notebook


def smoke_seeds(path: Path, notebook) -> str | None:
    """The SEEDS a notebook was executed with (papermill parameters), or the file's smoke tag; None
    for a full-study notebook."""
    parameters = (notebook.metadata.get("papermill") or {}).get("parameters") or {}
    seeds = parameters.get("SEEDS") if isinstance(parameters, dict) else None
    if isinstance(seeds, str) and any(part.strip() for part in seeds.split(",")):
        return seeds
    if "-smoke-" in Path(path).name:
        return Path(path).name
    return None


def explore_links(out: Path) -> str:
    """A Markdown paragraph linking the explore pages (``explore-*.html``, `make explore SEED=...`)
    beside the report, by relative path; "" when there are none."""
    folder = Path(out).parent
    pages = sorted(p.name for p in folder.glob("explore-*.html") if p.name != Path(out).name) \
        if folder.is_dir() else []
    if not pages:
        return ("*Per-seed exploration: `make explore SEED=ID` renders notebooks/explore.ipynb for one seed "
                "(top k per model with each annotator's grade, the documents p-MRR scores) beside this report.*")
    links = ", ".join(f"[{name.removesuffix('.html')}]({name})" for name in pages)
    return f"*Per-seed exploration (notebooks/explore.ipynb, `make explore SEED=ID`): {links}.*"


def html_report(notebooks: list[Path], out: Path, smoke: bool = False) -> Path:
    """One HTML page holding the executed notebooks, in order, without input prompts, with links to the
    explore pages beside it (`explore_links`); figures show their captions (`evalkit.study.figures.image`)."""
    import nbformat
    from nbconvert import HTMLExporter

    read = [(Path(p), read_notebook(p)) for p in notebooks]
    if not smoke:
        found = next(((p, s) for p, nb in read if (s := smoke_seeds(p, nb)) is not None), None)
        if found is not None:
            raise KitError(f"{found[0]}: a smoke notebook (SEEDS={found[1]}); a report of smoke runs needs "
                           "--smoke, or give the full-study notebooks")
    merged = nbformat.v4.new_notebook()
    merged.cells.append(nbformat.v4.new_markdown_cell(explore_links(out)))
    for path, notebook in read:
        merged.cells.append(nbformat.v4.new_markdown_cell(f"---\n*Executed notebook: `{path.name}`*"))
        merged.cells.extend(notebook.cells)
        merged.metadata = merged.metadata or notebook.metadata
    exporter = HTMLExporter(exclude_input_prompt=True, exclude_output_prompt=True)
    try:
        body, _ = exporter.from_notebook_node(merged)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # cells nbformat read but cannot render
        first = str(exc).splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise KitError(f"cannot render the notebooks ({first}); give notebooks executed by papermill") from None
    write_atomic(Path(out), body)
    return Path(out)
