"""`evalkit human`: the Human reference row of a collection whose scheme declares its annotators'
grades (`Scheme.human`: CSFCube's)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.cli.options import (
    add_measure_options,
    check_not_input,
    check_output_file,
    choices,
    evaluation_request,
    full_corpus,
)
from evalkit.cli.printing import print_summary, summary_settings, summary_title, write_per_query
from evalkit.core.errors import RequestError
from evalkit.data.protocols import DEFAULT_PROTOCOL, PROTOCOLS, check_protocol
from evalkit.datasets import human_schemes, load_annotated
from evalkit.evaluation.evaluate import computed_measures, summary_of
from evalkit.evaluation.request import EvaluationRequest, check_options, check_request


def cmd_human(args: argparse.Namespace) -> None:
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.study.human import human_per_query

    request = evaluation_request(args, protocol=None)  # --protocol here is the recipe's, not the judged runs'
    check_options(request)
    check_protocol(args.protocol)  # the recipe's protocol: the request's rule
    if args.per_query:
        args.per_query = str(check_output_file(Path(args.per_query), "--per-query"))
        check_not_input(Path(args.per_query), None, args.dataset, "--per-query")
    if args.recipe == "pool" and args.protocol != "pool":
        raise RequestError("recipe",
                           f"the pool recipe ranks the judged pool whatever the protocol; use --recipe protocol "
                           f"for the {args.protocol} list")
    full_corpus(args)
    if args.corpus and not Path(args.corpus).is_file():
        raise RequestError("corpus", "is not a file; give the path of abstracts-preds.zip", value=args.corpus)
    collection, annotators = load_annotated(args.dataset)
    names = list(check_request(request, collection).names)
    table = human_per_query(annotators, computed_measures(names), collection, recipe=args.recipe,
                            protocol=args.protocol, profile=args.profile, corpus=args.corpus)
    summary = summary_of(collection, table, names, args.aggregate, summary_settings(args, collection, names))
    summary["settings"] = {**summary["settings"], "recipe": args.recipe, "protocol": args.protocol}
    write_per_query(table, args.per_query)
    print_summary(summary, args.json, summary_title(f"Human reference ({args.recipe} recipe, {args.protocol} protocol)",
                                              collection, args.aggregate))


def add_parser(command) -> None:
    """Add `evalkit human`, its options and its handler (`command` makes the subparser)."""
    having = " or ".join(s.spec for s in human_schemes())
    human = command("human", "the Human reference row: annotators ranked against adjudication (CSFCube's)")
    human.add_argument("--dataset", default=EvaluationRequest.model_fields["dataset"].default, metavar="SPEC",
                       help=f"{having} (the datasets with annotators' grades)")
    human.add_argument("--recipe", choices=("pool", "protocol"), default="pool",
                       help="pool: each annotator ranks the judged pool (default); protocol: each annotator ranks "
                            "the first-stage list the models rerank under --protocol")
    human.add_argument("--protocol", metavar=choices(PROTOCOLS), default=DEFAULT_PROTOCOL,
                       help="protocol recipe: pool (= the pool recipe), pooled or full (needs --corpus)")
    human.add_argument("--profile", default="offline", help="protocol recipe: the profile's first stage and depth")
    human.add_argument("--corpus", default=None, metavar="PATH", help="full protocol: abstracts-preds.zip")
    add_measure_options(human)
    human.set_defaults(func=cmd_human)
