"""The optional parts of the kit and the libraries each brings (``pip install 'evalkit[EXTRA]'``).

A bare ``pip install evalkit`` evaluates runs and judgments, exports and compares: it installs
numpy, pandas, scipy, ir_measures and a few small libraries, and nothing here imports a model
library. Ranking with a model needs the ``models`` extra (torch, transformers,
sentence-transformers, bm25s); the extras' names are pyproject.toml's, each named after the part
of the kit that imports it. `missing` turns a model library's ImportError into the kit's one line.
"""

from __future__ import annotations

from evalkit.core.errors import MissingPrerequisite

# extra -> the top-level modules it installs that the kit imports (pyproject.toml's optional-dependencies)
EXTRAS = {
    "models": ("torch", "transformers", "sentence_transformers", "bm25s", "Stemmer", "ot"),
    "llm": ("gguf", "accelerate"),
    "full-corpus": ("faiss",),
    "paper": ("peft",),
    "onnx": ("onnxruntime", "onnx"),
    "cluster": ("ray",),
}
_EXTRA_OF = {module: extra for extra, modules in EXTRAS.items() for module in modules}


def missing(exc: ImportError, needed_for: str) -> MissingPrerequisite | None:
    """The kit's error for `exc` when it is a library of one of `EXTRAS` that is not installed
    (``needed_for`` says what wanted it), else None (a real import error is not hidden)."""
    name = getattr(exc, "name", None) or ""
    extra = _EXTRA_OF.get(name.split(".")[0])
    if extra is None:
        return None
    return MissingPrerequisite(f"{needed_for} needs {name.split('.')[0]}, which is not installed",
                               f"pip install 'evalkit[{extra}]' (with the CPU build of torch first: "
                               "pip install torch==2.13.0)" if extra == "models" else
                               f"pip install 'evalkit[{extra}]'")
