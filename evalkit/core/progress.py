"""Progress bars for the kit's long loops, shown where a person watches and nowhere else.

``EVALKIT_PROGRESS`` chooses where every bar of the kit (encoding, first stage, scoring,
LLM comparisons, hybrid components, corpus streaming) goes:

- ``terminal`` (what the Makefile exports): to the process's original stderr. Inside a
  papermill kernel (ipykernel) both ``sys.stderr`` and file descriptor 2 are forwarded into
  the executed notebook, so the bars go to the kernel's own copy of the terminal's stderr
  (``sys.stderr._original_stdstream_copy``), and the notebooks stay free of progress output.
  Non-terminal stderr (a log file) gets a line every 30 s (`HEARTBEAT_S`): at most, however
  often the loop advances, and at least, however rarely (a heartbeat thread refreshes the bar,
  so a 40-minute stage that updates once at its end still shows it is alive), each a whole line.
- ``off``: no bars.
- unset or ``auto``: tqdm's default (``sys.stderr``), as in an interactive session; inside a
  kernel (a notebook run by papermill directly, or in JupyterLab) the kernel's copy of the
  terminal's stderr, as ``terminal`` does, never the notebook's cells.

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
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from tqdm import tqdm

ENV = "EVALKIT_PROGRESS"
MODES = ("auto", "terminal", "off")
HEARTBEAT_S = 30.0  # a stream that is not a terminal: a line at least (and, terminal mode, at most) this often


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


class _Lines(_Tolerant):
    """A stream that is not a terminal (a log file): each of tqdm's in-place redraws (``\\r`` then
    the bar) becomes a whole line, so a log shows one line per redraw, not one ever-growing line."""

    def write(self, text: str) -> int:
        lines = [part.rstrip() for part in text.split("\r")]
        shown = "".join(f"{line}\n" if not line.endswith("\n") else line for line in lines if line.strip())
        if shown:
            super().write(shown)
        return len(text)


def _wait(stop: threading.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `stop`; True when it is set (the heartbeat's clock, replaced in tests)."""
    return stop.wait(seconds)


class _Bar(tqdm):
    """A tqdm bar that, on a stream that is not a terminal, is redrawn by a heartbeat thread at
    least every `HEARTBEAT_S` seconds until it closes, whatever the loop does meanwhile."""

    def start_heartbeat(self, interval: float, wait: Callable[[threading.Event, float], bool]) -> None:
        self._stop = threading.Event()

        def beat() -> None:
            while not wait(self._stop, interval):
                with self.get_lock():
                    if self.disable or self._stop.is_set():
                        return
                    self.refresh(nolock=True)

        self._heartbeat = threading.Thread(target=beat, name="evalkit-progress-heartbeat", daemon=True)
        self._heartbeat.start()

    def close(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        super().close()


def _target():
    """Where `mode` sends progress: a stream, or None (no stderr at all)."""
    # An ipykernel (papermill's kernel, JupyterLab's) forwards sys.stderr and fd 2 into the notebook;
    # the terminal is the copy of fd 2 it keeps for its own echo. Bars go there in either mode, so a
    # notebook run by papermill directly holds no progress output in its cells.
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(fd, int):
        return _fd_stream(fd)
    if mode() != "terminal":
        return sys.stderr
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
    known and below `min_total` (nothing worth watching). On a stream that is not a terminal its
    lines are whole lines, one at least every `HEARTBEAT_S` seconds while it is open."""
    current = mode()
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    stream = _stream()
    disable = bool(kwargs.pop("disable", False)) or current == "off" or (total is not None and total < min_total) \
        or stream.stream is None
    tty = bool(getattr(stream, "isatty", lambda: False)())
    if current == "terminal":
        kwargs.setdefault("mininterval", 0.5 if tty else HEARTBEAT_S)
        kwargs.setdefault("dynamic_ncols", tty)
    if not tty and not disable:
        stream = _Lines(stream.stream)
    made = _Bar(iterable, total=total, desc=desc, unit=unit, file=stream, disable=disable,
                smoothing=kwargs.pop("smoothing", 0.1), **kwargs)
    if not tty and not disable:
        made.start_heartbeat(HEARTBEAT_S, _wait)
    return made


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
    """The start line of a notebook target (`evalkit.make.launch`)."""
    announce(f"running {notebook} (profile {profile}, protocol {protocol}, "
             f"models {_study_models(notebook, profile, models)})")
