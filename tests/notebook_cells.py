"""A study notebook's own cells run in this process (no kernel), for tests that need its tables
from a study they built themselves, or count what its steps do: the very code a researcher reads,
not a copy of its sequence."""

from __future__ import annotations

import re

import nbformat
from notebook_run import ROOT

from evalkit.study.params import Study


def code_cells(name: str) -> list[tuple[bool, str]]:
    """(is the parameters cell, source) of each code cell of notebooks/NAME.ipynb."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    return [("parameters" in c.metadata.get("tags", []), c.source) for c in notebook.cells if c.cell_type == "code"]


def run_cells(name: str, study: Study | None = None, **parameters) -> dict:
    """Execute the notebook's code cells in order and return their namespace: with `study`, its check
    cell runs only its imports and `study` stands for what it checks; else `parameters` override the
    parameters cell's values, as papermill's injected cell does."""
    namespace: dict = {}
    for is_parameters, source in code_cells(name):
        if is_parameters:
            exec(source, namespace)
            namespace.update(parameters)
            continue
        if study is not None and "params.check(" in source:
            imports = "\n".join(line for line in source.splitlines() if re.match(r"(import|from) ", line))
            exec(imports, namespace)
            namespace["study"] = study
            continue
        exec(compile(source, f"notebooks/{name}.ipynb", "exec"), namespace)
    return namespace
