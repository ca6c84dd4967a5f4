"""`evalkit report`: executed notebooks merged into one HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.cli.options import check_output_file, same_file
from evalkit.core.errors import RequestError


def cmd_report(args: argparse.Namespace) -> None:
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.pages.report import read_notebook, report_of

    notebooks = [Path(p) for p in args.notebooks]
    # each a readable notebook (read_notebook's one-line errors), before the output; read once
    read = [(path, read_notebook(path)) for path in notebooks]
    out = check_output_file(Path(args.out), "--out")
    if any(same_file(out, p) for p in notebooks):
        raise RequestError("out", "is one of the notebooks; write the report elsewhere", value=out)
    print(report_of(read, out, smoke=args.smoke))


def add_parser(command) -> None:
    """Add `evalkit report`, its options and its handler (`command` makes the subparser)."""
    report = command("report", "merge executed notebooks into one HTML report")
    report.add_argument("notebooks", nargs="+", help="executed notebooks, in order")
    report.add_argument("--out", required=True, help="HTML file to write (a regular file; a symlink is written "
                        "through, a device refused)")
    report.add_argument("--smoke", action="store_true",
                        help="allow smoke notebooks (executed with SEEDS); refused otherwise")
    report.set_defaults(func=cmd_report)
