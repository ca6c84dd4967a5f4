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
    whole,
)
from evalkit.cli.printing import null_nan, print_summary, summary_settings, summary_title, write_per_query
from evalkit.data.protocols import PROTOCOLS
from evalkit.evaluation.evaluate import SCALE, compared_measures
from evalkit.evaluation.measures import PMRR_TIES
from evalkit.evaluation.stats import FAMILIES, TESTS, PairedTestSettings


def cmd_evaluate(args: argparse.Namespace) -> None:
    """The options as the evaluation request, the runs handed to the API's `evaluate_runs` (its checks,
    its sequence); prints the summary, the comparison's rows or the runs x measures table."""
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit import api

    request = evaluation_request(args)
    if args.per_query:  # an output file: the command line's own, checked before anything is read
        args.per_query = str(check_output_file(Path(args.per_query), "--per-query"))
        for runs in map(Path, args.runs):
            check_not_input(Path(args.per_query), runs, args.dataset, "--per-query")
    evaluated = api.evaluate_runs(args.runs, request, name=args.name)
    outcome, checked, judged = evaluated.outcome, evaluated.outcome.checked, evaluated.outcome.collection
    printed = not args.json and args.format != "rows"  # printed: one name per number (twins shown once)
    names = outcome.shown if printed else outcome.names
    settings = {**summary_settings(args, judged, names), "protocol": evaluated.protocol}
    if printed and outcome.twins:
        settings["same_as"] = ",".join(f"{twin}:{kept}" for twin, kept in outcome.twins.items())
    first = evaluated.labels[0]
    if len(evaluated.labels) == 1:
        notes = outcome.notes(first)
        write_per_query(outcome.tables[first], args.per_query)
        print_summary(outcome.summary(first, names, settings) | ({"notes": notes} if notes else {}), args.json,
                      summary_title(first, judged, args.aggregate))
        return
    notes = outcome.labelled_notes()
    if args.per_query:
        write_per_query(_concat_runs(outcome.tables), args.per_query)
    title = summary_title(f"{len(evaluated.labels)} runs against {first}", judged, args.aggregate)
    if args.json or args.format == "rows":
        _print_comparison(outcome.tests(compared_measures(names)), notes,
                          {**settings, **checked.test.described(), "alpha": checked.test.alpha,
                           "holm_over": FAMILIES[checked.test.family]},
                          args.json, title, checked.test, outcome.aggregate)
        return
    table = outcome.table(compared_measures(names))  # its notes end with the fold notes
    print(table.format(args.format), end="" if args.format != "text" else "\n")


def _concat_runs(tables: dict) -> object:
    """Per-query tables of several runs, one below the other, with a `run` column first."""
    return pd.concat([t.assign(run=name)[["run", *t.columns]] for name, t in tables.items()])


AGGREGATE_WORDS = {"folds": "the fold aggregate", "mean": "the mean over queries"}  # how the header says it


def _print_comparison(result, notes: list[str], settings: dict, as_json: bool, title: str,
                      test: PairedTestSettings, aggregate: str) -> None:
    """The comparison's rows: JSON (fractions, as every JSON of the kit), or a text listing x100 whose
    header says which aggregate the ``aggregate`` column holds (`aggregate`: ``folds`` or ``mean``,
    the outcome's: ``mean`` on a collection without folds)."""
    if as_json:
        rows = [null_nan(r) for r in result.to_dict(orient="records")]
        print(json.dumps({"reference": result["run"].iloc[0], "rows": rows, "notes": notes, "settings": settings},
                         allow_nan=False))
        return
    name = ("paired two-sided t-tests" if test.test == "t" else
            f"Fisher's randomization tests ({test.permutations:,} permutations, seed {test.seed})")
    tested = "every pair of runs" if test.family == "pairs" else "each run against the first"
    print(f"{title}: {name} of the per-query differences of {tested}, Holm-adjusted over {FAMILIES[test.family]} "
          f"(p_holm; better: the run marked significantly better, p_holm < {test.alpha:g}, as the table's marks); "
          f"values x{SCALE}: aggregate = the run's value in the measures table ({AGGREGATE_WORDS[aggregate]}), "
          "delta = the mean per-query difference run - against (what t and p test)")
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
    evaluate.add_argument("--family", metavar=choices(FAMILIES), default=None,
                          help="several --runs: the tests Holm adjusts over: pairs (every pair of runs, the default) "
                               "or reference (each run against the first, as the paper's Table 1 and the study's "
                               "relevance table)")
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
