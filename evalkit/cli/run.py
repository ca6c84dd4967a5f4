"""`evalkit run`: rank a dataset with one model into the run store; prints the run's folder."""

from __future__ import annotations

import argparse
import contextlib
import sys

from evalkit.cli.options import choices, split_list, whole
from evalkit.core.errors import RequestError
from evalkit.core.workers import parse_workers
from evalkit.data.protocols import DEFAULT_PROTOCOL, PROTOCOLS
from evalkit.evaluation.request import EvaluationRequest

ST_OPTIONS = {"query_template": "--query-template", "doc_template": "--doc-template",
              "empty_instruction_template": "--empty-instruction-template", "revision": "--revision"}


def _model_spec(args: argparse.Namespace) -> str:
    """--model, with the st: options folded into an st: spec (`evalkit.models.adhoc`)."""
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.models import adhoc

    given = {key: getattr(args, key) for key in ST_OPTIONS if getattr(args, key) is not None}
    if not given:
        return args.model
    if not adhoc.is_st(args.model):
        raise RequestError("model",
                           f"{ST_OPTIONS[next(iter(given))]} applies to an st: model (--model st:PATH_OR_HUB_ID); "
                           f"{args.model} takes its settings from the registry")
    location, settings = adhoc.parse_st(args.model)
    clash = next((key for key in given if key in settings), None)
    if clash is not None:
        raise RequestError("model", f"{ST_OPTIONS[clash]} repeats a setting the st: spec already names; give it once")
    return adhoc.st_spec(location, **{**settings, **given})


def cmd_run(args: argparse.Namespace) -> None:
    """The options as the run request and the evaluation request's query selection, handed to the API's
    `store_runs` (its checks, its sequence); prints the run's folder."""
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit import api
    from evalkit.pipeline.settings import RunRequest

    selection = EvaluationRequest(dataset=args.dataset, queries=split_list(args.queries),
                                  seeds=split_list(args.seeds or None))  # checked first, as `store_runs` does
    request = RunRequest(profile=args.profile, protocol=args.protocol, variants=args.variant,
                         instructions=args.instructions, prompt=args.prompt, first_stage=args.first_stage,
                         depth=args.depth, corpus=args.corpus, index_dtype=args.index_dtype,
                         executor=args.executor, workers=parse_workers(args.workers), runs_dir=args.runs_dir)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the folder alone (Ray prints "(raylet)" lines there)
        folders = api.store_runs(_model_spec(args), args.dataset, request, selection)
    print(folders[args.variant])  # a matching stored run is reused, not rewritten or parsed


def add_parser(command) -> None:
    """Add `evalkit run`, its options and its handler (`command` makes the subparser)."""
    run = command("run", "rank a dataset with one model and store the run (prints its folder)")
    run.add_argument("--dataset", required=True, metavar="SPEC", help="see datasets below")
    run.add_argument("--model", required=True,
                     help="a model name of the profile (see `evalkit models`), or st:PATH_OR_HUB_ID for any "
                          "sentence-transformers model (no registry entry needed)")
    run.add_argument("--query-template", metavar="T", help="st: models: query text, fields {instruction} {query} "
                                                           "(default {query})")
    run.add_argument("--doc-template", metavar="T", help="st: models: document text, fields {text} {title} "
                                                         "{abstract} (default {text})")
    run.add_argument("--empty-instruction-template", metavar="T",
                     help="st: models: query text when the instruction is blank, field {query} (default {query})")
    run.add_argument("--revision", help="st: models: the hub revision (a hub id without one is never reused)")
    run.add_argument("--instructions", metavar="YAML",
                     help="csfcube: your instruction file (as evalkit/config/instructions.yaml, any variants); "
                          "--variant picks one of its variants")
    run.add_argument("--profile", default="offline", help="model profile in config/models.yaml")
    run.add_argument("--protocol", metavar=choices(PROTOCOLS), default=DEFAULT_PROTOCOL,
                     help="pool: each query's given candidates (else the whole corpus), its excluded document "
                          "(csfcube: the seed) left out; released: the given candidates as released, nothing "
                          "excluded (how published csfcube rows were made); pooled: rerank a first stage's top "
                          "--depth; full: CSFCube's full corpus (--corpus)")
    run.add_argument("--variant", default="base", help="instruction variant of the dataset (csfcube: base, generic, "
                                                       "definition, paraphrase-1..3, aspect-subset)")
    run.add_argument("--prompt", metavar="TEXT", help="a prompt appended to every query text")
    run.add_argument("--first-stage", metavar="MODEL", help="pooled/full: first-stage model (default: the profile's)")
    run.add_argument("--depth", type=whole, help="pooled/full: first-stage depth (default: the profile's)")
    run.add_argument("--queries", metavar="Q1,Q2", help="only these query ids (smoke runs; not with --seeds)")
    run.add_argument("--seeds", metavar="S1,S2", help="csfcube: only these seed papers' queries (smoke runs)")
    run.add_argument("--corpus", metavar="PATH", help="full protocol: abstracts-preds.zip (figshare 14796339; "
                                                      "default: the file `evalkit data --corpus` downloaded)")
    run.add_argument("--index-dtype", choices=("float32", "float16"), default="float32",
                     help="whole-corpus search: the on-disk vector index's dtype (float16 halves it; the "
                          "ranking is then that of float16-rounded document vectors)")
    run.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="where a whole corpus is encoded and searched: local (this process) or ray (the Ray "
                          "cluster RAY_ADDRESS names, else a local one for this run); the numbers are the same")
    run.add_argument("--workers", metavar="N",  # checked by the one rule (evalkit.core.workers), not argparse
                     help="--executor ray: workers (default one per GPU of the cluster, else one per CPU)")
    run.add_argument("--runs-dir", required=True, metavar="DIR",
                     help="run store: DIR/PROFILE/DATASET/PROTOCOL/NAME/{run.trec,sidecar.json}")
    run.set_defaults(func=cmd_run)
