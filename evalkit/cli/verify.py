"""`evalkit verify`: the kit's rows against the published CSFCube record (`evalkit.study.record`)."""

from __future__ import annotations

import argparse
import os

from evalkit.cli.options import split_ids
from evalkit.datasets import csfcube, load_dataset


def cmd_verify(args: argparse.Namespace) -> int:
    """Kit rows against the published record (`evalkit.study.record.verify`); status 1 when a figure differs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # only weights already present: verify never downloads
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.pipeline.settings import check_runs_dir
    from evalkit.study import record

    runs_dir = check_runs_dir(args.runs_dir)  # the run store's one rule (`evalkit run`'s and the API's)
    wanted = split_ids(args.models, "--models")
    published = record.load_record()
    record.check_models(published, wanted)
    table, notes = record.verify(published, load_dataset(csfcube.SCHEME.name), runs_dir, wanted)
    print("The published CSFCube record (x100; the release's MAP and NDCG%20, mean of the two test folds)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for note in notes:
        print(note)
    return 1 if table["flag"].any() else 0


def add_parser(command) -> None:
    """Add `evalkit verify`, its options and its handler (`command` makes the subparser)."""
    verify = command("verify", "the kit's rows against the published CSFCube record (MAP, NDCG%%20), with the "
                               "difference; status 1 when a figure is more than 0.5 points away")
    verify.add_argument("--runs-dir", required=True, metavar="DIR",
                        help="run store: stored runs are reused, a missing one is made where its weights are present")
    verify.add_argument("--models", metavar="M1,M2", help="only these kit models of the record (default: all)")
    verify.set_defaults(func=cmd_verify)
