"""`evalkit export`: a collection whose scheme declares export formats (`Scheme.exports`: CSFCube's)
as BEIR, FollowIR or TREC files."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.cli.options import is_within
from evalkit.core.errors import DataError, RequestError
from evalkit.datasets import input_folder, load_dataset, scheme_of, schemes
from evalkit.datasets.export import FORMATS, export
from evalkit.evaluation.request import EvaluationRequest


def exported() -> tuple[str, ...]:
    """The specs of the registered schemes export writes (`Scheme.exports`): the others are
    already in these formats."""
    return tuple(s.spec for s in schemes() if s.exports)


def cmd_export(args: argparse.Namespace) -> None:
    scheme = scheme_of(args.dataset)
    if scheme is None or not scheme.exports:
        raise RequestError("dataset", f"export writes {' or '.join(exported())} only, not {args.dataset!r}; "
                           "the other datasets are already in these formats")
    if args.format not in scheme.exports:
        raise RequestError("format", f"export writes {scheme.name} as {', '.join(scheme.exports)}, not "
                           f"{args.format}; choose one")
    out = Path(args.out)
    folder = input_folder(args.dataset)
    if folder is not None and is_within(out, folder):
        raise DataError(out, f"inside the {scheme.name} data folder {folder}; export elsewhere")
    if out.exists() and not out.is_dir():
        raise DataError(out, "is a file; give a new or empty folder to export into")
    if out.is_dir() and any(out.iterdir()):
        raise DataError(out, "folder is not empty; give a new or empty folder to export into")
    print(export(load_dataset(args.dataset), args.format, out))


def datasets_help() -> str:
    """The help's datasets section: the registered schemes export writes (`exported`), not every
    scheme the other commands read."""
    return "\n".join(["datasets (--dataset SPEC):",
                      *(line for s in schemes() if s.exports for line in s.help_lines())])


def add_parser(command) -> None:
    """Add `evalkit export`, its options and its handler (`command` makes the subparser); the formats'
    help is `evalkit.datasets.export.FORMATS`."""
    parser = command("export", "write CSFCube as BEIR folders (one per facet), FollowIR instruction pairs "
                               "or TREC files (qrels, pools, query and paper texts), for other tools")
    parser.epilog = datasets_help()
    parser.add_argument("--dataset", default=EvaluationRequest.model_fields["dataset"].default,
                        metavar="SPEC", help=" or ".join(exported()))
    parser.add_argument("--format", required=True, choices=tuple(FORMATS),
                        help="; ".join(f"{name}: {files}" for name, files in FORMATS.items()))
    parser.add_argument("out", metavar="OUT", help="a new or empty folder")
    parser.set_defaults(func=cmd_export)
