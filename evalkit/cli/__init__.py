"""The `evalkit` command line. User errors print one line and exit with status 2.

Commands: `run` (rank a dataset with one model into the run store), `evaluate` (score a
run), `human` (CSFCube's Human reference), `models`, `report`, `data`, `export` (CSFCube as
BEIR, FollowIR or TREC files), `plan` (what a study needs and costs, before any work), `verify` (the
kit's rows against the published CSFCube record).

A thin layer on the library (`evalkit.evaluation.evaluate`, `evalkit.pipeline.runner`,
`evalkit.pipeline.run_input`, ...): it parses and checks options, calls the library and prints.
Each command imports the modules only it needs when it runs (lazy, for start-up cost), so
``--help`` and a BM25 run load no neural library (`tests/kit/test_imports.py`).

The console script's entry, `main`, loads nothing heavy before it catches a Ctrl-C: the commands'
modules (pandas among them) load inside it (`evalkit.cli.app`), so an interrupt at any moment
of start-up is the one line ``evalkit: interrupted`` and status 130, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

INTERRUPTED = 130  # the shell's status for a process ended by SIGINT


def main(argv: list[str] | None = None) -> int:
    """Run the `evalkit` command line on `argv` (default: the process's arguments); the exit status."""
    if sys.stderr is None:  # started with stderr closed (2>&-): notes and errors go nowhere, never onto stdout
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the process's stderr, open until exit)
    try:
        status = _app().main(argv)
    except KeyboardInterrupt:
        status = None
    if argv is None:  # the console script: the command is done, so a Ctrl-C during the interpreter's exit
        _stop_listening()  # (joining threads) has nothing left to interrupt
    if status is None:
        print("evalkit: interrupted", file=sys.stderr)
        return INTERRUPTED
    return status


def _stop_listening() -> None:
    """Ignore SIGINT from here on; an interrupt arriving while the handler is swapped is ignored too."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def __getattr__(name: str):
    """The command line's other names (`build_parser`, `COMMANDS`, the command modules), from `app`."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_app(), name)


def _app():
    """`evalkit.cli.app`, imported on first use (inside `main`'s Ctrl-C handling)."""
    return importlib.import_module("evalkit.cli.app")
