"""`evalkit evaluate`: score one run, or compare several (paired tests, the runs x measures table)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

from evalkit.cli.options import (
    add_measure_options,
    check_not_input,
    check_output_file,
    choices,
    evaluation_request,
    same_file,
    whole,
)
from evalkit.cli.printing import null_nan, print_summary, summary_settings, summary_title, write_per_query
from evalkit.core.errors import DataError, RequestError
from evalkit.data.protocols import PROTOCOLS
from evalkit.datasets import load_dataset
from evalkit.evaluation.compare import FAMILY
from evalkit.evaluation.evaluate import SCALE, compared_measures
from evalkit.evaluation.measures import PMRR_TIES
from evalkit.evaluation.outcome import evaluate_tables, score_runs
from evalkit.evaluation.request import check_options, check_request
from evalkit.evaluation.stats import TESTS, PairedTestSettings
from evalkit.pipeline.run_input import one_protocol, read_run, run_labels


def cmd_evaluate(args: argparse.Namespace) -> None:
    request = evaluation_request(args)
    check_options(request)  # every option's rule before anything is read (the API's rules, worded --option)
    paths = [Path(p) for p in args.runs]
    for runs in paths:
        if not runs.exists():
            raise DataError(runs, "no such run file or directory; check --runs")
    repeated = next((p for p in paths if sum(same_file(p, q) or p == q for q in paths) > 1), None)
    if repeated is not None:
        raise RequestError("runs", "given twice; list each run once", value=repeated)
    if len(paths) > 1 and args.name:
        raise RequestError("name", "picks the official files of one folder; compare run files or run-store folders")
    if args.per_query:
        args.per_query = str(check_output_file(Path(args.per_query), "--per-query"))
        for runs in paths:
            check_not_input(Path(args.per_query), runs, args.dataset, "--per-query")
    collection = load_dataset(args.dataset)
    checked = check_request(request, collection)
    runs, protocols = {}, {}
    for path in paths:
        runs[path], protocols[path], judged = read_run(path, args.name, collection, args.protocol)
    labels = run_labels(paths) if len(paths) > 1 else {paths[0]: args.name or str(paths[0])}
    one_protocol([(labels[p], protocols[p]) for p in paths])  # the API's reference= follows the same rule
    outcome = evaluate_tables(judged, score_runs(judged, {labels[p]: runs[p] for p in paths}, checked), checked)
    printed = not args.json and args.format != "rows"  # printed: one name per number (twins shown once)
    names = outcome.shown if printed else outcome.names
    settings = {**summary_settings(args, judged, names), "protocol": protocols[paths[0]]}
    if printed and outcome.twins:
        settings["same_as"] = ",".join(f"{twin}:{kept}" for twin, kept in outcome.twins.items())
    first = labels[paths[0]]
    if len(paths) == 1:
        notes = outcome.notes(first)
        write_per_query(outcome.tables[first], args.per_query)
        print_summary(outcome.summary(first, names, settings) | ({"notes": notes} if notes else {}), args.json,
                      summary_title(first, judged, args.aggregate))
        return
    notes = outcome.labelled_notes()
    if args.per_query:
        write_per_query(_concat_runs(outcome.tables), args.per_query)
    title = summary_title(f"{len(paths)} runs against {first}", judged, args.aggregate)
    if args.json or args.format == "rows":
        _print_comparison(outcome.tests(compared_measures(names)), notes,
                          {**settings, **checked.test.described(), "alpha": checked.test.alpha, "holm_over": FAMILY},
                          args.json, title, checked.test)
        return
    table = outcome.table(compared_measures(names))  # its notes end with the fold notes
    print(table.format(args.format), end="" if args.format != "text" else "\n")


def _concat_runs(tables: dict) -> object:
    """Per-query tables of several runs, one below the other, with a `run` column first."""
    return pd.concat([t.assign(run=name)[["run", *t.columns]] for name, t in tables.items()])


def _print_comparison(result, notes: list[str], settings: dict, as_json: bool, title: str,
                      test: PairedTestSettings) -> None:
    """The comparison's rows: JSON (fractions, as every JSON of the kit), or a text listing x100."""
    if as_json:
        rows = [null_nan(r) for r in result.to_dict(orient="records")]
        print(json.dumps({"reference": result["run"].iloc[0], "rows": rows, "notes": notes, "settings": settings},
                         allow_nan=False))
        return
    name = ("paired two-sided t-tests" if test.test == "t" else
            f"Fisher's randomization tests ({test.permutations:,} permutations, seed {test.seed})")
    print(f"{title}: {name} of the per-query differences of every pair of runs, Holm-adjusted over {FAMILY} "
          f"(p_holm; better: the run marked significantly better, p_holm < {test.alpha:g}, as the table's marks); "
          f"values x{SCALE}: aggregate = the run's value in the measures table (the fold aggregate), delta = the "
          "mean per-query difference run - against (what t and p test)")
    shown = result.assign(n=result["n"].astype(int), aggregate=SCALE * result["aggregate"],
                          delta=SCALE * result["delta"])
    print(shown.to_string(index=False, formatters={"aggregate": _two, "delta": _two, "t": _two,
                                                   "p": _pvalue, "p_holm": _pvalue}, na_rep="-"))
    for note in notes:
        print(f"note: {note}")


def _two(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _pvalue(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:#.3g}"


def add_parser(command) -> None:
    """Add `evalkit evaluate`, its options and its handler (`command` makes the subparser)."""
    evaluate = command("evaluate", "score a run against a dataset's judgments")
    evaluate.add_argument("--dataset", required=True, metavar="SPEC", help="see datasets below")
    evaluate.add_argument("--runs", required=True, metavar="PATH", action="append",
                          help="a TREC run file, a run-store folder (holding run.trec), or (csfcube) a folder of "
                               "official ranking files with --name; repeat it to compare runs (paired t-tests "
                               "of every pair, Holm-adjusted)")
    evaluate.add_argument("--name", help="csfcube official files: NAME in test-pid2pool-csfcube-NAME-FACET-ranked.json")
    evaluate.add_argument("--protocol", metavar=choices(PROTOCOLS), default=None,
                          help="pool: documents must come from each query's candidates, its excluded document "
                               "(csfcube: the seed) neither ranked nor judged (default, or the run folder's "
                               "recorded protocol); released: the candidates as released, the seed ranked and judged")
    evaluate.add_argument("--format", choices=("text", "markdown", "latex", "rows"), default="text",
                          help="several --runs: the runs x measures table as text (default), markdown or latex "
                               "(x100, superscripts marking the runs each is significantly better than, Holm over all "
                               "pairs of runs); rows: one row per measure, stratum and pair of runs (delta, t, p, "
                               "p_holm and the run marked better: what made each mark)")
    evaluate.add_argument("--test", metavar=choices(TESTS), default="t",
                          help="several --runs: paired two-sided t-test (default, the paper's) or Fisher's "
                               "randomization test")
    evaluate.add_argument("--permutations", type=whole, default=None, metavar="N",
                          help="Fisher's randomization test: random permutations (default 10000)")
    evaluate.add_argument("--seed", type=whole, default=None, metavar="N",
                          help="Fisher's randomization test: random seed (default 42)")
    add_measure_options(evaluate)
    evaluate.add_argument("--pmrr-ties", metavar=choices(PMRR_TIES), default="kit",
                          help="p-MRR's order of tied scores: kit (document id ascending, the kit's rule, the "
                               "default) or mteb (id descending, as mteb's evaluator)")
    evaluate.set_defaults(func=cmd_evaluate)
