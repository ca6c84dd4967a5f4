"""Progress bars for the kit's long loops, shown where a person watches and nowhere else.

``EVALKIT_PROGRESS`` chooses where every bar of the kit (encoding, first stage, scoring,
LLM comparisons, hybrid components, corpus streaming) goes:

- ``terminal`` (what the Makefile exports): to the process's original stderr. Inside a
  papermill kernel (ipykernel) both ``sys.stderr`` and file descriptor 2 are forwarded into
  the executed notebook, so the bars go to the kernel's own copy of the terminal's stderr
  (``sys.stderr._original_stdstream_copy``), and the notebooks stay free of progress output.
  Non-terminal stderr (a log file) gets a line every 30 s at most.
- ``off``: no bars.
- unset or ``auto``: tqdm's default (``sys.stderr``), as in an interactive session.

`bar(...)` takes tqdm's arguments and returns a tqdm bar; `announce(...)` prints one line
to the same place (`announce_notebook` prints the "running NOTEBOOK ..." line of a make target).

Progress is never worth a run: with no stderr (``2>&-``: Python then has no ``sys.stderr``) the
bars and lines are dropped, and a write to a stderr that fails (closed, a reader gone) ends that
stream's progress output, not the run (`_Tolerant`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

ENV = "EVALKIT_PROGRESS"
MODES = ("auto", "terminal", "off")


def mode() -> str:
    value = (os.environ.get(ENV) or "auto").strip().lower()
    return value if value in MODES else "auto"


class _Tolerant:
    """A text stream whose failed writes (OSError: a closed descriptor, a reader gone; ValueError:
    a closed file) silence it instead of raising; with no stream (None) it drops everything."""

    def __init__(self, stream):
        self.stream = stream

    def _call(self, name: str, *args, default=None):
        if self.stream is None:
            return default
        try:
            return getattr(self.stream, name)(*args)
        except (OSError, ValueError):
            self.stream = None
            return default

    def write(self, text: str) -> int:
        return self._call("write", text, default=len(text))

    def flush(self) -> None:
        self._call("flush")

    def isatty(self) -> bool:
        return bool(self._call("isatty", default=False))

    def fileno(self) -> int:
        if self.stream is None:
            raise OSError("no stream")
        return self.stream.fileno()


def _target():
    """Where `mode` sends progress: a stream, or None (no stderr at all)."""
    if mode() != "terminal":
        return sys.stderr
    # An ipykernel (papermill's kernel) forwards fd 2 into the notebook too; the terminal is the
    # copy of fd 2 it keeps for its own echo.
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        return _fd_stream(fd)
    return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr


def _stream() -> _Tolerant:
    return _Tolerant(_target())


@functools.cache
def _fd_stream(fd: int):
    try:
        return os.fdopen(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace")
    except OSError:  # the kernel's copy of the terminal is closed
        return None


def bar(iterable: Iterable | None = None, *, total: int | None = None, desc: str | None = None,
        unit: str = "it", min_total: int = 0, **kwargs) -> tqdm:
    """A tqdm bar to the place `EVALKIT_PROGRESS` names; disabled when off, or when `total` is
    known and below `min_total` (nothing worth watching)."""
    current = mode()
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    stream = _stream()
    disable = bool(kwargs.pop("disable", False)) or current == "off" or (total is not None and total < min_total) \
        or stream.stream is None
    if current == "terminal":
        tty = bool(getattr(stream, "isatty", lambda: False)())
        kwargs.setdefault("mininterval", 0.5 if tty else 30.0)
        kwargs.setdefault("dynamic_ncols", tty)
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=stream, disable=disable,
                smoothing=kwargs.pop("smoothing", 0.1), **kwargs)


def announce(line: str) -> None:
    """One line to where the bars go (nothing when they are off)."""
    if mode() == "off":
        return
    stream = _stream()
    print(line, file=stream, flush=True)


def _study_models(notebook: str, profile: str, models: str) -> str:
    """The models a study notebook runs: MODELS when given, else the profile's study default."""
    if models.strip():
        return models
    try:  # the registry file itself: importing the registry (torch) would cost seconds per target
        import yaml

        registry = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "models.yaml").read_text())
        study = registry["profiles"][profile].get("study") or {}
        default = study.get(notebook, study.get("relevance") if notebook == "instruction_following" else None)
    except Exception:  # an unknown profile fails in the notebook itself, with its message
        default = None
    if isinstance(default, list | tuple):
        return ",".join(default)
    return str(default) if default else "notebook default"


def announce_notebook(notebook: str, profile: str, protocol: str, models: str = "") -> None:
    """The start line of a notebook target (`evalkit.study.launch`)."""
    announce(f"running {notebook} (profile {profile}, protocol {protocol}, "
             f"models {_study_models(notebook, profile, models)})")
