"""`evalkit plan`: what a study needs and costs, before any work."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evalkit.cli.options import choices, split_ids, split_list
from evalkit.core.errors import RequestError
from evalkit.core.workers import parse_workers
from evalkit.data.collection import select_queries
from evalkit.data.protocols import DEFAULT_PROTOCOL, PROTOCOLS, check_protocol
from evalkit.datasets import csfcube
from evalkit.datasets.csfcube_corpus import check_corpus


def cmd_plan(args: argparse.Namespace) -> None:
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.models import registry
    from evalkit.pipeline.plan import plan, render

    check_protocol(args.protocol)  # the request's rule, before anything is read
    registry.profile_settings(args.profile)
    models = split_ids(args.models or None, "--models")  # empty (make plan without MODELS): the study lists
    for name in models or ():
        registry.spec(name, args.profile)
    if args.corpus and not Path(args.corpus).is_file():
        raise RequestError("corpus", "no such file; give abstracts-preds.zip (figshare 14796339)", value=args.corpus)
    if args.corpus:
        check_corpus(Path(args.corpus))
    collection = csfcube.load_collection()
    seeds = split_list(args.seeds or None)
    queries = select_queries(collection, seeds)
    workers = parse_workers(args.workers)  # empty (make plan without WORKERS): in one process
    result = plan(args.profile, args.protocol, collection, models, queries, args.corpus, workers, args.device)
    print(json.dumps(result, indent=1) if args.json else render(result))


def add_parser(command) -> None:
    """Add `evalkit plan`, its options and its handler (`command` makes the subparser)."""
    plan = command("plan", "before any work: what each row of a study needs (weights, GPU memory, keys, servers), "
                           "its work (texts, LLM prompts and tokens), cost and time, and every missing prerequisite "
                           "with its fix")
    plan.add_argument("--profile", default="offline", help="model profile in config/models.yaml")
    plan.add_argument("--protocol", metavar=choices(PROTOCOLS), default=DEFAULT_PROTOCOL, help="pool, pooled or full")
    plan.add_argument("--models", metavar="M1,M2", help="the rows (default: every model of the profile's study lists)")
    plan.add_argument("--seeds", metavar="S1,S2", help="only these seed papers' queries (a smoke run)")
    plan.add_argument("--corpus", metavar="PATH", help="full protocol: abstracts-preds.zip (default: the download)")
    plan.add_argument("--workers", metavar="N", help="as runs on the Ray executor with N workers: the corpus encoding "
                                                     "and a kit-started vLLM model's judgments spread over them")
    plan.add_argument("--device", choices=("gpu", "cpu"), help="whose per-device rates (default: this machine's)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    plan.set_defaults(func=cmd_plan)
