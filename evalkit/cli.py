"""The `evalkit` command line. User errors print one line and exit with status 2."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from evalkit import csfcube
from evalkit.errors import KitError
from evalkit.evaluation import AGGREGATIONS, check_run, per_query, summarize
from evalkit.human import human_per_query
from evalkit.instructions import VARIANTS
from evalkit.metrics import DISCOUNTS
from evalkit.protocols import PROTOCOLS
from evalkit.runs import load_run


def _check_dataset(name: str) -> None:
    if name != "csfcube":
        raise KitError(f"unknown dataset {name!r}; this command supports: csfcube")


def _print_summary(summary: dict, as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(summary))
        return
    metrics = {k: v for k, v in summary.items() if k not in ("queries", "settings")}
    print(title)
    print(pd.DataFrame(metrics).T.to_string(float_format=lambda v: f"{v:.4f}"))
    settings = ", ".join(f"{k}={v}" for k, v in summary["settings"].items())
    counts = ", ".join(f"{k}={v}" for k, v in summary["queries"].items())
    print(f"queries: {counts}; {settings}")


def _summary_with_counts(table: pd.DataFrame, args: argparse.Namespace) -> dict:
    summary = summarize(table, args.aggregate)
    summary["queries"] = {f: int((table.facet == f).sum()) for f in csfcube.FACETS} | {"all": len(table)}
    summary["settings"] = {"discount": args.discount, "aggregate": args.aggregate, "k": args.k}
    return summary


def cmd_evaluate(args: argparse.Namespace) -> None:
    _check_dataset(args.dataset)
    data = csfcube.load()
    run = load_run(Path(args.runs), args.name)
    check_run(run, data, args.protocol, source=str(args.runs))
    table = per_query(data, run, args.k, args.discount)
    if args.per_query:
        try:
            table.to_csv(args.per_query)
        except OSError as exc:
            raise KitError(f"{args.per_query}: cannot write the per-query CSV ({exc})") from None
    _print_summary(_summary_with_counts(table, args), args.json, f"{args.name or args.runs} on CSFCube (test folds)")


def cmd_human(args: argparse.Namespace) -> None:
    _check_dataset(args.dataset)
    table = human_per_query(csfcube.load(), args.k, args.discount)
    _print_summary(_summary_with_counts(table, args), args.json, "Human reference on CSFCube (test folds)")


def cmd_run(args: argparse.Namespace) -> None:
    from evalkit.runner import RunSettings, execute

    seeds = tuple(args.seeds.split(",")) if args.seeds else None
    settings = RunSettings(args.model, args.profile, args.protocol, args.variant, args.first_stage,
                           args.depth, seeds, args.corpus)
    print(execute(settings, Path(args.out)))


def cmd_models(args: argparse.Namespace) -> None:
    from evalkit.models import registry

    for name in registry.model_names(args.profile):
        model = registry.spec(name, args.profile)
        print(f"{name}\t{model.family}\t{model.role}\t{model.label}")


def cmd_report(args: argparse.Namespace) -> None:
    from evalkit.report import html_report

    print(html_report([Path(p) for p in args.notebooks], Path(args.out)))


def cmd_data(args: argparse.Namespace) -> None:
    root = csfcube.fetch()
    if args.path:
        print(root)
        return
    data = csfcube.load(root)
    print(f"CSFCube at {root}: {len(data.queries)} queries, {len(data.papers)} papers, sha256 verified")


def _add_scoring_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="csfcube", help="dataset name (csfcube)")
    parser.add_argument("--discount", choices=DISCOUNTS, default="csfcube", help="NDCG discount convention")
    parser.add_argument("--aggregate", choices=AGGREGATIONS, default="folds",
                        help="folds: official mean of the two test-fold means; mean: plain mean")
    parser.add_argument("--k", type=int, default=20, help="cut-off for NDCG, P and R")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    evaluate = sub.add_parser("evaluate", help="score rankings against CSFCube's judgments")
    evaluate.add_argument("--runs", required=True, help="folder of official ranking files, or a TREC run file")
    evaluate.add_argument("--name", help="run name NAME in test-pid2pool-csfcube-NAME-FACET-ranked.json")
    evaluate.add_argument("--protocol", choices=PROTOCOLS, default="pool",
                          help="pool: candidates must come from the judged pool")
    evaluate.add_argument("--per-query", metavar="CSV", help="also write per-query values to this CSV")
    _add_scoring_options(evaluate)
    evaluate.set_defaults(func=cmd_evaluate)

    human = sub.add_parser("human", help="the Human reference row (annotators ranked against adjudication)")
    _add_scoring_options(human)
    human.set_defaults(func=cmd_human)

    run = sub.add_parser("run", help="rank CSFCube with one model and write the run files")
    run.add_argument("--model", required=True, help="a model name of the profile (see `evalkit models`)")
    run.add_argument("--profile", default="offline", help="model profile in config/models.yaml")
    run.add_argument("--protocol", default="pool", help=f"one of {', '.join(PROTOCOLS)}")
    run.add_argument("--variant", default="base", help=f"one of {', '.join(VARIANTS)}")
    run.add_argument("--first-stage", help="pooled protocol: first-stage model (default: the profile's)")
    run.add_argument("--depth", type=int, help="pooled protocol: first-stage depth (default: the profile's)")
    run.add_argument("--seeds", help="comma-separated seed ids: only their queries (smoke runs)")
    run.add_argument("--corpus", help="full protocol: abstracts-preds.zip (figshare 14796339)")
    run.add_argument("--out", required=True, help="run folder")
    run.set_defaults(func=cmd_run)

    models = sub.add_parser("models", help="list the models of a profile")
    models.add_argument("--profile", default="offline")
    models.set_defaults(func=cmd_models)

    report = sub.add_parser("report", help="merge executed notebooks into one HTML report")
    report.add_argument("notebooks", nargs="+", help="executed notebooks, in order")
    report.add_argument("--out", required=True, help="HTML file to write")
    report.set_defaults(func=cmd_report)

    data = sub.add_parser("data", help="fetch (if needed) and verify the CSFCube files")
    data.add_argument("--path", action="store_true", help="print only the verified data folder")
    data.set_defaults(func=cmd_data)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except KitError as exc:
        print(f"evalkit: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
