"""evalkit: evaluation kit for instruction-following retrieval on CSFCube.

`evalkit.evaluate` and `evalkit.register_model` are the Python API (`evalkit.api`), imported on
first use so that ``import evalkit`` stays light.
"""

__version__ = "0.1.0"
_API = ("evaluate", "register_model", "Evaluation")


def __getattr__(name: str):
    if name in _API:
        from evalkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
