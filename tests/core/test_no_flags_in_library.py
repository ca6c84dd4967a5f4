"""The library never names a command-line flag in an error (the front end spells a field its own
way, `evalkit.core.errors.spell`): no string of a raise outside the front ends (evalkit/cli,
evalkit/pages) holds ``--option``, except inside a command to run (`` `evalkit data --corpus` ``,
``pip install --no-deps``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "evalkit"
FRONT_ENDS = ("cli", "pages")
FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z-]+")
COMMAND = re.compile(r"`[^`]*`|pip install [^;,)]*|vllm serve [^;,)]*")


def _library_modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in FRONT_ENDS)


def _raised_strings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for inner in ast.walk(node.exc):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    yield node.lineno, inner.value


@pytest.mark.parametrize("path", _library_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_library_error_names_a_command_line_flag(path):
    flags = [(line, text) for line, text in _raised_strings(ast.parse(path.read_text()))
             if FLAG.search(COMMAND.sub("", text))]
    assert flags == [], f"{path.relative_to(ROOT)} names a flag; use a RequestError field or a {{field}} placeholder"
