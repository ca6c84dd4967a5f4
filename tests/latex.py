"""Compile exported `.tex` tables with a real LaTeX engine (pdflatex, from the Debian packages
texlive-latex-base and texlive-latex-recommended, which holds booktabs); skips with the reason
when no engine is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGES = "texlive-latex-base texlive-latex-recommended"


def compile_tables(tables: list[Path], folder: Path) -> Path:
    """A booktabs document holding every table, compiled in `folder`; fails with LaTeX's log."""
    engine = shutil.which("pdflatex")
    if engine is None:
        pytest.skip(f"no LaTeX engine (pdflatex); install it with: apt-get install -y {PACKAGES}")
    assert tables, "no .tex tables to compile"
    body = "\n".join(f"\\section*{{table {i}}}\n\\resizebox{{\\textwidth}}{{!}}{{\\input{{{Path(t).resolve()}}}}}"
                     for i, t in enumerate(tables, start=1))
    document = folder / "tables.tex"
    document.write_text("\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n"
                        "\\usepackage{graphicx}\n\\begin{document}\n" + body + "\n\\end{document}\n")
    done = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", document.name], cwd=folder,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Missing character" not in (folder / "tables.log").read_text(errors="replace")
    return folder / "tables.pdf"
