"""`evalkit export`: CSFCube as BEIR, FollowIR or TREC files."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.cli.options import is_within
from evalkit.core.errors import KitError
from evalkit.datasets import input_folder, load_dataset
from evalkit.evaluation.evaluate import CSFCUBE


def cmd_export(args: argparse.Namespace) -> None:
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.datasets.export import export

    if args.dataset.strip() != CSFCUBE:
        raise KitError(f"export writes csfcube only, not {args.dataset!r}; the other datasets are already "
                       "in these formats")
    out = Path(args.out)
    folder = input_folder(args.dataset)
    if folder is not None and is_within(out, folder):
        raise KitError(f"{out}: inside the CSFCube data folder {folder}; export elsewhere")
    if out.exists() and not out.is_dir():
        raise KitError(f"{out}: is a file; give a new or empty folder to export into")
    if out.is_dir() and any(out.iterdir()):
        raise KitError(f"{out}: folder is not empty; give a new or empty folder to export into")
    print(export(load_dataset(args.dataset), args.format, out))


def add_parser(command) -> None:
    """Add `evalkit export`, its options and its handler (`command` makes the subparser)."""
    export = command("export", "write CSFCube as BEIR folders (one per facet), FollowIR instruction pairs "
                               "or TREC qrels, for other tools")
    export.add_argument("--dataset", default=CSFCUBE, metavar="SPEC", help="csfcube (the only dataset exported)")
    export.add_argument("--format", required=True, choices=("beir", "followir", "trec"),
                        help="beir: OUT/FACET/{corpus,queries}.jsonl, qrels/test.tsv; followir: original and "
                             "changed instruction per paired query; trec: qrels.txt, pairs.tsv, pools.txt")
    export.add_argument("out", metavar="OUT", help="a new or empty folder")
    export.set_defaults(func=cmd_export)
