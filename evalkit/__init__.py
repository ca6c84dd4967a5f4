"""evalkit: evaluation kit for instruction-following retrieval on CSFCube.

`evalkit.evaluate` and `evalkit.register_model` are the Python API (`evalkit.api`), with the two
requests `evaluate` takes (`evalkit.RunRequest`, `evalkit.EvaluationRequest`), imported on first use
so that ``import evalkit`` stays light.
"""

import os as _os

from evalkit.core.version import __version__  # noqa: F401  (evalkit.__version__)

# EVALKIT_PROGRESS=off silences every bar, the Hugging Face libraries' too ("Loading weights",
# downloads): they read this variable when first imported, which is after the kit's import.
if (_os.environ.get("EVALKIT_PROGRESS") or "").strip().lower() == "off":
    _os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

_API = ("evaluate", "register_model", "Evaluation", "RunRequest", "EvaluationRequest")


def __getattr__(name: str):
    if name in _API:
        # lazy: `import evalkit` stays light; the API loads on first use
        from evalkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
