"""The kit's version (pyproject.toml's), recorded in run sidecars and the report: a leaf module,
so that the runner and the report read it without importing the package's front door."""

__version__ = "0.1.0"
