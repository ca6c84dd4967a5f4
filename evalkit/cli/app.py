"""The `evalkit` command line's parser and dispatch (`evalkit.cli.main` loads this module only
after it has made a Ctrl-C during start-up one line): each command's module, the one error
line of each failure kind, status 2 for a user's error."""

from __future__ import annotations

import argparse
import os
import sys

# One module per command, each adding its subparser (`add_parser`) and its handler; what they share
# is in `options` (the usage error, options checked before any work) and `printing` (summaries).
from evalkit.cli import INTERRUPTED, data, evaluate, export, human, models, plan, report, run, verify
from evalkit.cli import __doc__ as DESCRIPTION
from evalkit.cli.options import ArgumentParser
from evalkit.core.errors import CLI, KitError
from evalkit.core.errors import report as report_error
from evalkit.datasets import dataset_help

COMMANDS = (run, evaluate, human, models, report, export, plan, verify, data)  # in --help's order


def build_parser() -> ArgumentParser:
    """The parser of every command; the datasets' help is read now, so a scheme registered before
    `main` runs is listed."""
    datasets_help = dataset_help()
    parser = ArgumentParser(prog="evalkit", description=DESCRIPTION, epilog=datasets_help,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, epilog=datasets_help,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    for module in COMMANDS:
        module.add_parser(command)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit meets no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or already closed
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # a reader that closed the pipe is found here, inside the handlers
    except KitError as exc:  # worded as the command line spells its fields (--permutations, --protocol)
        return report_error(exc.for_front_end(CLI))
    except BrokenPipeError:  # output piped into e.g. `head`, which has read enough: end quietly, as Unix tools do
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT
        print("evalkit: interrupted", file=sys.stderr)
        return INTERRUPTED
    except OSError as exc:  # e.g. a disk that fills or a folder that vanishes while writing
        where = f"{exc.filename}: " if exc.filename else ""
        return report_error(f"{where}{exc.strerror or exc}")
    except RecursionError:  # an input nested deeper than any reader follows
        return report_error("an input file is nested too deeply to read; check the files given")
    except Exception as exc:  # sqlite (a cache file read-only, full or damaged) and other storage errors
        import sqlite3

        if not isinstance(exc, sqlite3.Error):
            raise
        return report_error(f"a cache file failed ({' '.join(str(exc).splitlines())}); free disk space, make the "
                      "cache writable, or delete the damaged file under EVALKIT_CACHE")
    return status or 0
