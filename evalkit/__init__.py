"""evalkit: evaluation kit for instruction-following retrieval on CSFCube."""

__version__ = "0.1.0"
