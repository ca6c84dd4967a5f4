"""The `evalkit` command line. User errors print one line and exit with status 2.

Commands: `run` (rank a dataset with one model into the run store), `evaluate` (score a
run), `human` (CSFCube's Human reference), `models`, `report`, `data`, `export` (CSFCube as
BEIR, FollowIR or TREC files), `plan` (what a study needs and costs, before any work), `verify` (the
kit's rows against the published CSFCube record).

A thin layer on the library (`evalkit.evaluation.evaluate`, `evalkit.pipeline.runner`,
`evalkit.pipeline.run_input`, ...): it parses and checks options, calls the library and prints.
Each command imports the modules only it needs when it runs (lazy, for start-up cost), so
``--help`` and a BM25 run load no neural library (`tests/kit/test_imports.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from evalkit.core.errors import KitError, report
from evalkit.core.protocols import DEFAULT_PROTOCOL, POOL_PROTOCOLS, PROTOCOLS
from evalkit.data.collection import queries_of_seeds
from evalkit.data.runstore import RANKING, read_sidecar, run_folder
from evalkit.datasets import DATASET_HELP, csfcube, load_dataset
from evalkit.datasets.csfcube_corpus import check_corpus
from evalkit.evaluation.evaluate import (
    AGGREGATIONS,
    CSFCUBE,
    DEFAULT_DISCOUNT,
    DEFAULT_K,
    DISCOUNTS,
    PMRR,
    ROBUSTNESS_K,
    SCALE,
    check_measures,
    check_run,
    computed_measures,
    default_measures,
    fold_notes,
    per_query,
    protocol_collection,
    shown_once,
    summary_of,
)
from evalkit.evaluation.measures import MAX_K, PMRR_TIES
from evalkit.pipeline.run_input import load_any_run


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error in the kit's one line (no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        sys.exit(report(message))


# --- arguments checked before anything is loaded or scored ------------------------------------


def _split_ids(text: str | None, option: str) -> tuple[str, ...] | None:
    """Comma-separated ids, blanks dropped, repeats dropped (first kept); None when not given."""
    if text is None:
        return None
    ids = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not ids:
        raise KitError(f"{option} {text!r} names no ids; give comma-separated ids, e.g. {option} a,b")
    return ids


def _check_runs_dir(path: Path) -> None:
    """The run store folder: a folder (or creatable under one) that this user may write."""
    if path.exists() and not path.is_dir():
        raise KitError(f"--runs-dir {path}: is a file; give a folder for the run store")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise KitError(f"--runs-dir {path}: {probe} is a file, so the folder cannot be made; give another folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise KitError(f"--runs-dir {path}: {probe} is not writable; give a folder you can write")


def _check_output_file(path: Path, option: str) -> Path:
    """The file to write for an output option: a regular file or a new one, in an existing folder this
    user may write (checked before any work). A symlink is written through (the file it points at
    is replaced, the link kept); a device, FIFO or socket is refused, never replaced by a file."""
    if path.is_symlink():
        try:
            path = path.resolve(strict=False)
        except (OSError, RuntimeError):  # a loop of links
            raise KitError(f"{option} {path}: is a symlink that resolves to no file; give a file name") from None
    if path.exists() and not path.is_dir() and not path.is_file():
        raise KitError(f"{option} {path}: is not a regular file (a device, FIFO or socket); give a file name")
    if path.is_dir():
        raise KitError(f"{option} {path}: is a folder; give a file name")
    if not path.parent.is_dir():
        raise KitError(f"{option} {path}: cannot write the file (folder {path.parent} does not exist)")
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise KitError(f"{option} {path}: cannot write the file (not writable); give a path you can write")
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _is_within(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def _dataset_folder(spec: str) -> Path | None:
    """The folder a dataset spec reads (for refusing to overwrite it), where known."""
    scheme, colon, rest = spec.strip().partition(":")
    if not colon and scheme == CSFCUBE:
        try:
            return csfcube.locate()
        except KitError:
            return None
    if colon and scheme in ("beir", "followir", "instructir") and Path(rest).expanduser().is_dir():
        return Path(rest).expanduser()
    return None


def _check_not_input(path: Path, runs: Path | None, dataset: str, option: str) -> None:
    """Refuse an output path that is one of the files the command reads (the run, the dataset's files)."""
    inputs = [] if runs is None else [runs] if runs.is_file() else \
        [p for p in runs.iterdir() if p.is_file()] if runs.is_dir() else []
    hit = next((p for p in inputs if _same_file(path, p)), None)
    folder = _dataset_folder(dataset)
    if hit is None and folder is not None and path.is_file() and _is_within(path, folder):
        hit = path
    if hit is not None:
        raise KitError(f"{option} {path}: is an input file ({hit}); write the per-query CSV elsewhere")


# --- measures -----------------------------------------------------------------------------------


def _parse_measure_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise KitError(f"--measures {text!r} names no measure; e.g. --measures nDCG@10,AP")
    repeated = next((n for n in names if names.count(n) > 1), None)
    if repeated is not None:
        raise KitError(f"--measures lists {repeated} twice; list each measure once")
    return names


def _check_measure_options(args: argparse.Namespace) -> None:
    """Before loading: --k and --discount shape only the default CSFCube table."""
    if args.k is not None and args.k < 1:
        raise KitError(f"--k {args.k}: cut-off k={args.k} must be a positive integer")
    if args.k is not None and args.k > MAX_K:
        raise KitError(f"--k {str(args.k)[:20]}: cut-off is absurdly large; give at most {MAX_K:,}")
    if args.measures is not None:
        if args.k is not None or args.discount is not None:
            option = "--k" if args.k is not None else "--discount"
            raise KitError(f"{option} shapes only the default measures; with --measures write the measure "
                           "itself (e.g. nDCG@10 or nDCG_csfcube@20)")
        _parse_measure_list(args.measures)


# --- summaries ----------------------------------------------------------------------------------


def _null_nan(value):
    """NaN (and any other non-finite float) as JSON null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _null_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_null_nan(v) for v in value]
    return value


def _print_summary(summary: dict, as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(_null_nan(summary), allow_nan=False))
        return
    import pandas as pd

    values = {k: v for k, v in summary.items() if k not in ("queries", "settings", "notes")}
    print(f"{title}, values x{SCALE}")
    print((SCALE * pd.DataFrame(values).T).to_string(float_format=lambda v: f"{v:.2f}", na_rep="-"))
    settings = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in summary["settings"].items())
    counts = ", ".join(f"{k}={v}" for k, v in summary["queries"].items())
    print(f"queries: {counts}; {settings}")
    for note in summary.get("notes", []):
        print(f"note: {note}")


def _title(what: str, collection, aggregate_by: str) -> str:
    part = "test folds" if aggregate_by == "folds" and collection.folds else "all queries"
    return f"{what} on {collection.name} ({part})"


def _settings(args: argparse.Namespace, collection, names: Sequence[str]) -> dict:
    aggregate_by = args.aggregate if collection.folds else "mean"  # summarize's plain mean without folds
    settings = {"dataset": args.dataset, "measures": list(names), "aggregate": aggregate_by}
    if args.measures is None and collection.name == CSFCUBE:
        settings |= {"discount": args.discount or DEFAULT_DISCOUNT, "k": DEFAULT_K if args.k is None else args.k}
    if getattr(args, "pmrr_ties", None) and PMRR in names:
        settings["pmrr_ties"] = args.pmrr_ties
    return settings


def _write_per_query(table, path: str | None) -> None:
    if not path:
        return
    try:
        table.to_csv(path)
    except OSError as exc:
        raise KitError(f"{path}: cannot write the per-query CSV ({exc.strerror or exc})") from None


# --- evaluate -------------------------------------------------------------------------------------


def _run_labels(paths: list[Path]) -> dict[Path, str]:
    """Each run's name in a comparison: its run-store name (sidecar) where no other run has it,
    else the path as given."""
    recorded = {}
    for path in paths:
        sidecar = read_sidecar(path) if path.is_dir() and (path / RANKING).is_file() else None
        name = sidecar.get("run") if sidecar else None
        recorded[path] = name if isinstance(name, str) and name else None
    names = list(recorded.values())
    return {p: n if n is not None and names.count(n) == 1 and n not in map(str, paths) else str(p)
            for p, n in recorded.items()}


def cmd_evaluate(args: argparse.Namespace) -> None:
    _check_measure_options(args)
    paths = [Path(p) for p in args.runs]
    for runs in paths:
        if not runs.exists():
            raise KitError(f"{runs}: no such run file or directory; check --runs")
    repeated = next((p for p in paths if sum(_same_file(p, q) or p == q for q in paths) > 1), None)
    if repeated is not None:
        raise KitError(f"--runs {repeated}: given twice; list each run once")
    if len(paths) > 1 and args.name:
        raise KitError("--name picks the official files of one folder; compare run files or run-store folders")
    if args.per_query:
        args.per_query = str(_check_output_file(Path(args.per_query), "--per-query"))
        for runs in paths:
            _check_not_input(Path(args.per_query), runs, args.dataset, "--per-query")
    collection = load_dataset(args.dataset)
    names = _parse_measure_list(args.measures) if args.measures else default_measures(collection, args.discount, args.k)
    check_measures(names, collection)
    tables, protocols = {}, {}
    for runs in paths:
        run, recorded = load_any_run(runs, args.name, collection)
        protocols[runs] = args.protocol or recorded or DEFAULT_PROTOCOL
        judged = protocol_collection(collection, protocols[runs])
        check_run(run, judged, source=str(runs), within_candidates=protocols[runs] in POOL_PROTOCOLS)
        tables[runs] = per_query(judged, run, computed_measures(names), args.pmrr_ties)
    if len(set(protocols.values())) > 1:
        raise KitError(f"the runs were made under different protocols ({', '.join(sorted(set(protocols.values())))}); "
                       "compare runs of one protocol, or give --protocol")
    collection = protocol_collection(collection, protocols[paths[0]])
    twins = {}
    if not args.measures and not args.json and args.format != "rows":  # printed: one name per number
        names, twins = shown_once(names, tables.values())
    settings = {**_settings(args, collection, names), "protocol": protocols[paths[0]]}
    if twins:
        settings["same_as"] = ",".join(f"{twin}:{kept}" for twin, kept in twins.items())
    if len(paths) == 1:
        table = tables[paths[0]]
        summary = summary_of(collection, table, names, args.aggregate, settings)
        notes = fold_notes(collection, table, settings["aggregate"])
        _write_per_query(table, args.per_query)
        _print_summary(summary | ({"notes": notes} if notes else {}), args.json,
                       _title(args.name or str(paths[0]), collection, args.aggregate))
        return
    from evalkit.evaluation.compare import compare
    from evalkit.evaluation.compare_table import compare_table

    labels = _run_labels(paths)
    named = {labels[p]: table for p, table in tables.items()}
    compared = [n for n in names if not ROBUSTNESS_K.fullmatch(n)]
    from evalkit.evaluation.stats import PERMUTATIONS

    test = {"test": args.test, "permutations": args.permutations or PERMUTATIONS, "seed": _seed_of(args)}
    result = compare(collection, named, compared, settings["aggregate"], **test)
    notes = sorted({f"{label}: {note}" for label, table in named.items()
                    for note in fold_notes(collection, table, settings["aggregate"])})
    if args.per_query:
        _write_per_query(_concat_runs(named), args.per_query)
    title = _title(f"{len(named)} runs against {labels[paths[0]]}", collection, args.aggregate)
    if args.json or args.format == "rows":
        _print_comparison(result, notes, {**settings, **_test_settings(test)}, args.json, title, test)
        return
    table = compare_table(collection, named, compared, settings["aggregate"], **test)
    table.notes += notes
    print(table.format(args.format), end="" if args.format != "text" else "\n")


def _seed_of(args: argparse.Namespace) -> int:
    from evalkit.evaluation.stats import PERMUTATION_SEED

    if args.test != "fisher" and (args.permutations is not None or args.seed is not None):
        raise KitError("--permutations and --seed set Fisher's randomization test; add --test fisher")
    if args.permutations is not None and not 100 <= args.permutations <= 10_000_000:
        raise KitError(f"--permutations {args.permutations}: give between 100 and 10,000,000")
    return PERMUTATION_SEED if args.seed is None else args.seed


def _test_settings(test: dict) -> dict:
    return test if test["test"] == "fisher" else {"test": "t"}


def _concat_runs(tables: dict) -> object:
    """Per-query tables of several runs, one below the other, with a `run` column first."""
    import pandas as pd

    return pd.concat([t.assign(run=name)[["run", *t.columns]] for name, t in tables.items()])


def _print_comparison(result, notes: list[str], settings: dict, as_json: bool, title: str, test: dict) -> None:
    """The comparison's rows: JSON (fractions, as every JSON of the kit), or a text listing x100."""
    if as_json:
        rows = [_null_nan(r) for r in result.to_dict(orient="records")]
        print(json.dumps({"reference": result["run"].iloc[0], "rows": rows, "notes": notes, "settings": settings},
                         allow_nan=False))
        return
    name = ("paired two-sided t-tests" if test["test"] == "t" else
            f"Fisher's randomization tests ({test['permutations']:,} permutations, seed {test['seed']})")
    print(f"{title}: {name} of the per-query differences, Holm-adjusted over the runs; values x{SCALE}: "
          "aggregate = the measures table's value (the fold aggregate), delta = the mean per-query difference "
          "from the first run (what t and p test)")
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


# --- human ------------------------------------------------------------------------------------------


def cmd_human(args: argparse.Namespace) -> None:
    from evalkit.study.human import human_per_query

    _check_measure_options(args)
    if args.dataset.strip() != CSFCUBE:
        raise KitError(f"the Human reference exists only for csfcube (its annotators' grades), not {args.dataset!r}")
    if args.per_query:
        args.per_query = str(_check_output_file(Path(args.per_query), "--per-query"))
        _check_not_input(Path(args.per_query), None, args.dataset, "--per-query")
    if args.recipe == "pool" and args.protocol != "pool":
        raise KitError(f"the pool recipe ranks the judged pool whatever the protocol; use --recipe protocol "
                       f"for the {args.protocol} list")
    _corpus(args)
    if args.corpus and not Path(args.corpus).is_file():
        raise KitError(f"--corpus {args.corpus} is not a file; give the path of abstracts-preds.zip")
    data = csfcube.load()
    collection = csfcube.to_collection(data)
    names = _parse_measure_list(args.measures) if args.measures else default_measures(collection, args.discount, args.k)
    check_measures(names, collection)
    table = human_per_query(data, computed_measures(names), collection, recipe=args.recipe, protocol=args.protocol,
                            profile=args.profile, corpus=args.corpus)
    summary = summary_of(collection, table, names, args.aggregate, _settings(args, collection, names))
    summary["settings"] = {**summary["settings"], "recipe": args.recipe, "protocol": args.protocol}
    _write_per_query(table, args.per_query)
    _print_summary(summary, args.json, _title(f"Human reference ({args.recipe} recipe, {args.protocol} protocol)",
                                              collection, args.aggregate))


# --- run --------------------------------------------------------------------------------------------


ST_OPTIONS = {"query_template": "--query-template", "doc_template": "--doc-template",
              "empty_instruction_template": "--empty-instruction-template", "revision": "--revision"}


def _model_spec(args: argparse.Namespace) -> str:
    """--model, with the st: options folded into an st: spec (`evalkit.models.adhoc`)."""
    from evalkit.models import adhoc

    given = {key: getattr(args, key) for key in ST_OPTIONS if getattr(args, key) is not None}
    if not given:
        return args.model
    if not adhoc.is_st(args.model):
        raise KitError(f"{ST_OPTIONS[next(iter(given))]} applies to an st: model (--model st:PATH_OR_HUB_ID); "
                       f"{args.model} takes its settings from the registry")
    location, settings = adhoc.parse_st(args.model)
    clash = next((key for key in given if key in settings), None)
    if clash is not None:
        raise KitError(f"{ST_OPTIONS[clash]} repeats a setting the st: spec already names; give it once")
    return adhoc.st_spec(location, **{**settings, **given})


def cmd_run(args: argparse.Namespace) -> None:
    from evalkit.models import registry
    from evalkit.pipeline.runner import RunSettings, check_settings, ensure_folder

    if args.depth is not None and args.depth < 1:
        raise KitError(f"--depth {args.depth}: the first-stage depth must be a positive integer")
    if args.protocol in POOL_PROTOCOLS and (args.depth is not None or args.first_stage):
        option = "--depth" if args.depth is not None else "--first-stage"
        raise KitError(f"{option} applies to the pooled and full protocols; add --protocol pooled or drop it")
    if args.corpus is not None:
        if args.protocol != "full":
            raise KitError("--corpus applies to --protocol full; add it or drop --corpus")
        if not Path(args.corpus).is_file():
            raise KitError(f"--corpus {args.corpus}: no such file; give abstracts-preds.zip (figshare 14796339)")
    _corpus(args)
    if args.prompt is not None and not args.prompt.strip():
        raise KitError("--prompt is empty; give the prompt text or drop --prompt")
    queries = _split_ids(args.queries, "--queries")
    seeds = _split_ids(args.seeds or None, "--seeds")
    model = _model_spec(args)
    if args.instructions is not None and not Path(args.instructions).is_file():
        raise KitError(f"--instructions {args.instructions}: no such file; give a YAML file shaped as "
                       "evalkit/config/instructions.yaml")
    runs_dir = Path(args.runs_dir)
    _check_runs_dir(runs_dir)
    collection = load_dataset(args.dataset)
    if seeds is not None:
        queries = queries_of_seeds(seeds, collection)
    if queries is not None:
        unknown = next((q for q in queries if q not in collection.queries), None)
        if unknown is not None:
            raise KitError(f"--queries: {collection.name} has no query {unknown}; give ids of its queries")
    settings = RunSettings(model, dataset=args.dataset, profile=args.profile, protocol=args.protocol,
                           variant=args.variant, prompt=args.prompt, first_stage=args.first_stage,
                           depth=args.depth, queries=queries, corpus=args.corpus, instructions=args.instructions,
                           index_dtype=args.index_dtype)
    check_settings(settings, collection)
    if args.first_stage:
        registry.spec(args.first_stage, args.profile)
    run_folder(runs_dir, settings, collection.name)  # the run name must round-trip through a TREC file
    print(ensure_folder(settings, collection, runs_dir))  # a matching stored run is reused, not rewritten or parsed


# --- models, report, data -------------------------------------------------------------------------


def cmd_models(args: argparse.Namespace) -> None:
    from evalkit.models import registry

    for name in registry.model_names(args.profile):
        model = registry.spec(name, args.profile)
        print(f"{name}\t{model.family}\t{model.role}\t{model.label}")


def cmd_report(args: argparse.Namespace) -> None:
    from evalkit.pages.report import html_report, read_notebook

    notebooks = [Path(p) for p in args.notebooks]
    for path in notebooks:
        if path.is_dir():
            raise KitError(f"{path}: is a folder, not a notebook; give executed .ipynb files")
        if not path.is_file():
            raise KitError(f"{path}: no such notebook; give executed .ipynb files")
    out = _check_output_file(Path(args.out), "--out")
    if any(_same_file(out, p) for p in notebooks):
        raise KitError(f"--out {out}: is one of the notebooks; write the report elsewhere")
    for path in notebooks:
        read_notebook(path)
    print(html_report(notebooks, out, smoke=args.smoke))


def cmd_data(args: argparse.Namespace) -> None:
    if args.corpus:
        _data_corpus(args.path)
        return
    root = csfcube.fetch()
    if args.path:
        print(root)
        return
    data = csfcube.load(root)
    print(f"CSFCube at {root}: {len(data.queries)} queries, {len(data.papers)} papers, sha256 verified")


def _data_corpus(path_only: bool) -> None:
    """`evalkit data --corpus`: download abstracts-preds.zip (resumed, md5-checked) into the cache."""
    from evalkit.datasets import csfcube_download

    path = csfcube_download.download()
    if path_only:
        print(path)
        return
    record = json.loads(csfcube_download.record_path(path).read_text(encoding="utf-8"))
    print(f"corpus at {path}: {record['size']:,} bytes, md5 {record['md5']} as published, sha256 {record['sha256']}")


def _corpus(args: argparse.Namespace) -> None:
    """The full protocol's corpus: --corpus, else the file `evalkit data --corpus` downloaded."""
    from evalkit.datasets import csfcube_download

    if args.protocol == "full" and not args.corpus:
        args.corpus = csfcube_download.resolve(None)
        if args.corpus is None:
            raise KitError(csfcube_download.MISSING)


def cmd_plan(args: argparse.Namespace) -> None:
    from evalkit.models import registry
    from evalkit.pipeline.plan import plan, render

    registry.profile_settings(args.profile)
    models = _split_ids(args.models or None, "--models")  # empty (make plan without MODELS): the study lists
    for name in models or ():
        registry.spec(name, args.profile)
    if args.corpus and not Path(args.corpus).is_file():
        raise KitError(f"--corpus {args.corpus}: no such file; give abstracts-preds.zip (figshare 14796339)")
    if args.corpus:
        check_corpus(Path(args.corpus))
    collection = csfcube.load_collection()
    seeds = _split_ids(args.seeds or None, "--seeds")
    queries = queries_of_seeds(seeds, collection) if seeds else None
    result = plan(args.profile, args.protocol, collection, models, queries, args.corpus)
    print(json.dumps(result, indent=1) if args.json else render(result))


def cmd_export(args: argparse.Namespace) -> None:
    from evalkit.datasets.export import export

    if args.dataset.strip() != CSFCUBE:
        raise KitError(f"export writes csfcube only, not {args.dataset!r}; the other datasets are already "
                       "in these formats")
    out = Path(args.out)
    folder = _dataset_folder(args.dataset)
    if folder is not None and _is_within(out, folder):
        raise KitError(f"{out}: inside the CSFCube data folder {folder}; export elsewhere")
    if out.exists() and not out.is_dir():
        raise KitError(f"{out}: is a file; give a new or empty folder to export into")
    if out.is_dir() and any(out.iterdir()):
        raise KitError(f"{out}: folder is not empty; give a new or empty folder to export into")
    print(export(load_dataset(args.dataset), args.format, out))


# --- verify -------------------------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    """Kit rows against the published record (`evalkit.study.record`); status 1 when a figure differs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # only weights already present: verify never downloads
    import pandas as pd

    from evalkit.pipeline.runner import RunSettings, ensure_run
    from evalkit.study import record

    runs_dir = Path(args.runs_dir)
    _check_runs_dir(runs_dir)
    wanted = _split_ids(args.models, "--models")
    published = record.load_record()
    rows = published[published["kit_model"] != ""].drop_duplicates(["row", "kit_model", "profile", "protocol"])
    unknown = sorted(set(wanted or ()) - set(rows["kit_model"]))
    if unknown:
        raise KitError(f"--models: {unknown[0]} has no row in the published record; choose among "
                       f"{', '.join(dict.fromkeys(rows['kit_model']))}")
    collection = load_dataset(CSFCUBE)
    sample = csfcube.load_official_run(csfcube.locate() / "sample_ranked_pools", "specter")
    tables = [record.compare(published, "SPECTER", record.official_figures(collection, sample),
                             record.RELEASE_SAMPLE)]
    notes = []
    for _, entry in rows.iterrows():
        if wanted is not None and entry["kit_model"] not in wanted:
            continue
        settings = RunSettings(entry["kit_model"], CSFCUBE, entry["profile"], entry["protocol"])
        try:
            run = ensure_run(settings, collection, runs_dir)
        except KitError as exc:
            notes.append(f"{entry['row']}: not run ({' '.join(str(exc).split())})")
            continue
        compared = record.compare(published, entry["row"],
                                  record.official_figures(protocol_collection(collection, entry["protocol"]), run))
        tables.append(compared)
        if entry["kit_model"] == "specter":
            same, total = record.ranking_agreement(run, sample)
            notes.append(f"{entry['row']}: {same}/{total} queries ranked exactly as the release's sample_ranked_pools")
        if compared["flag"].any():
            notes.append(f"{entry['row']}: more than {record.TOLERANCE} points from the record; compare the run's "
                         f"sidecar.json (model_settings, protocol {entry['protocol']}) with the source: "
                         f"{entry['source']}")
    table = pd.concat(tables, ignore_index=True)
    print("The published CSFCube record (x100; the release's MAP and NDCG%20, mean of the two test folds)")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for note in notes:
        print(note)
    return 1 if table["flag"].any() else 0


# --- parser -------------------------------------------------------------------------------------


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--measures", metavar="M1,M2",
                        help="measures (nDCG@k, nDCG_csfcube@k, nDCG_csfcube%%p, MAP_csfcube, AP[@k], RR[@k], P@k, "
                             "R@k, p-MRR, robustness@k); default: the dataset's own, for csfcube the kit's table "
                             "and the release's official MAP_csfcube and nDCG_csfcube%%20")
    parser.add_argument("--discount", choices=DISCOUNTS, default=None,
                        help="csfcube default table: nDCG_csfcube@k (official script, the default) or nDCG@k (trec)")
    parser.add_argument("--k", type=int, default=None, help="csfcube default table: cut-off for nDCG, P and R (20)")
    parser.add_argument("--aggregate", choices=AGGREGATIONS, default="folds",
                        help="folds: mean of the test folds' means where the dataset has folds; mean: plain mean")
    parser.add_argument("--per-query", metavar="CSV", help="also write per-query values to this CSV")
    parser.add_argument("--json", action="store_true", help="print one JSON object (NaN as null) instead of a table")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="evalkit", description=__doc__, epilog=DATASET_HELP,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, epilog=DATASET_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

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
    run.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT_PROTOCOL,
                     help="pool: each query's given candidates (else the whole corpus), its excluded document "
                          "(csfcube: the seed) left out; released: the given candidates as released, nothing "
                          "excluded (how published csfcube rows were made); pooled: rerank a first stage's top "
                          "--depth; full: CSFCube's full corpus (--corpus)")
    run.add_argument("--variant", default="base", help="instruction variant of the dataset (csfcube: base, generic, "
                                                       "definition, paraphrase-1..3, aspect-subset)")
    run.add_argument("--prompt", metavar="TEXT", help="a prompt appended to every query text")
    run.add_argument("--first-stage", metavar="MODEL", help="pooled/full: first-stage model (default: the profile's)")
    run.add_argument("--depth", type=int, help="pooled/full: first-stage depth (default: the profile's)")
    subset = run.add_mutually_exclusive_group()
    subset.add_argument("--queries", metavar="Q1,Q2", help="only these query ids (smoke runs)")
    subset.add_argument("--seeds", metavar="S1,S2", help="csfcube: only these seed papers' queries (smoke runs)")
    run.add_argument("--corpus", metavar="PATH", help="full protocol: abstracts-preds.zip (figshare 14796339; "
                                                      "default: the file `evalkit data --corpus` downloaded)")
    run.add_argument("--index-dtype", choices=("float32", "float16"), default="float32",
                     help="whole-corpus search: the on-disk vector index's dtype (float16 halves it; the "
                          "ranking is then that of float16-rounded document vectors)")
    run.add_argument("--runs-dir", required=True, metavar="DIR",
                     help="run store: DIR/PROFILE/DATASET/PROTOCOL/NAME/{run.trec,sidecar.json}")
    run.set_defaults(func=cmd_run)

    evaluate = command("evaluate", "score a run against a dataset's judgments")
    evaluate.add_argument("--dataset", required=True, metavar="SPEC", help="see datasets below")
    evaluate.add_argument("--runs", required=True, metavar="PATH", action="append",
                          help="a TREC run file, a run-store folder (holding run.trec), or (csfcube) a folder of "
                               "official ranking files with --name; repeat it to compare runs (paired t-tests "
                               "against the first, Holm-adjusted)")
    evaluate.add_argument("--name", help="csfcube official files: NAME in test-pid2pool-csfcube-NAME-FACET-ranked.json")
    evaluate.add_argument("--protocol", choices=PROTOCOLS, default=None,
                          help="pool: documents must come from each query's candidates, its excluded document "
                               "(csfcube: the seed) neither ranked nor judged (default, or the run folder's "
                               "recorded protocol); released: the candidates as released, the seed ranked and judged")
    evaluate.add_argument("--format", choices=("text", "markdown", "latex", "rows"), default="text",
                          help="several --runs: the runs x measures table as text (default), markdown or latex "
                               "(x100, superscripts marking the runs each is significantly better than, Holm); "
                               "rows: one row per measure, stratum and run against the first (delta, t, p)")
    evaluate.add_argument("--test", choices=("t", "fisher"), default="t",
                          help="several --runs: paired two-sided t-test (default, the paper's) or Fisher's "
                               "randomization test")
    evaluate.add_argument("--permutations", type=int, default=None, metavar="N",
                          help="Fisher's randomization test: random permutations (default 10000)")
    evaluate.add_argument("--seed", type=int, default=None, metavar="N",
                          help="Fisher's randomization test: random seed (default 42)")
    _add_measure_options(evaluate)
    evaluate.add_argument("--pmrr-ties", choices=PMRR_TIES, default="kit",
                          help="p-MRR's order of tied scores: kit (document id ascending, the kit's rule, the "
                               "default) or mteb (id descending, as mteb's evaluator)")
    evaluate.set_defaults(func=cmd_evaluate)

    human = command("human", "CSFCube's Human reference row (annotators ranked against adjudication)")
    human.add_argument("--dataset", default=CSFCUBE, metavar="SPEC", help="csfcube (the only dataset with it)")
    human.add_argument("--recipe", choices=("pool", "protocol"), default="pool",
                       help="pool: each annotator ranks the judged pool (default); protocol: each annotator ranks "
                            "the first-stage list the models rerank under --protocol")
    human.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT_PROTOCOL,
                       help="protocol recipe: pool (= the pool recipe), pooled or full (needs --corpus)")
    human.add_argument("--profile", default="offline", help="protocol recipe: the profile's first stage and depth")
    human.add_argument("--corpus", default=None, metavar="PATH", help="full protocol: abstracts-preds.zip")
    _add_measure_options(human)
    human.set_defaults(func=cmd_human)

    models = command("models", "list the models of a profile")
    models.add_argument("--profile", default="offline")
    models.set_defaults(func=cmd_models)

    report = command("report", "merge executed notebooks into one HTML report")
    report.add_argument("notebooks", nargs="+", help="executed notebooks, in order")
    report.add_argument("--out", required=True, help="HTML file to write (a regular file; a symlink is written "
                        "through, a device refused)")
    report.add_argument("--smoke", action="store_true",
                        help="allow smoke notebooks (executed with SEEDS); refused otherwise")
    report.set_defaults(func=cmd_report)

    export = command("export", "write CSFCube as BEIR folders (one per facet), FollowIR instruction pairs "
                               "or TREC qrels, for other tools")
    export.add_argument("--dataset", default=CSFCUBE, metavar="SPEC", help="csfcube (the only dataset exported)")
    export.add_argument("--format", required=True, choices=("beir", "followir", "trec"),
                        help="beir: OUT/FACET/{corpus,queries}.jsonl, qrels/test.tsv; followir: original and "
                             "changed instruction per paired query; trec: qrels.txt, pairs.tsv, pools.txt")
    export.add_argument("out", metavar="OUT", help="a new or empty folder")
    export.set_defaults(func=cmd_export)

    plan = command("plan", "before any work: what each row of a study needs (weights, GPU memory, keys, servers), "
                           "its work (texts, LLM prompts and tokens), cost and time, and every missing prerequisite "
                           "with its fix")
    plan.add_argument("--profile", default="offline", help="model profile in config/models.yaml")
    plan.add_argument("--protocol", choices=PROTOCOLS, default=DEFAULT_PROTOCOL, help="pool, pooled or full")
    plan.add_argument("--models", metavar="M1,M2", help="the rows (default: every model of the profile's study lists)")
    plan.add_argument("--seeds", metavar="S1,S2", help="only these seed papers' queries (a smoke run)")
    plan.add_argument("--corpus", metavar="PATH", help="full protocol: abstracts-preds.zip (default: the download)")
    plan.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    plan.set_defaults(func=cmd_plan)

    verify = command("verify", "the kit's rows against the published CSFCube record (MAP, NDCG%%20), with the "
                               "difference; status 1 when a figure is more than 0.5 points away")
    verify.add_argument("--runs-dir", required=True, metavar="DIR",
                        help="run store: stored runs are reused, a missing one is made where its weights are present")
    verify.add_argument("--models", metavar="M1,M2", help="only these kit models of the record (default: all)")
    verify.set_defaults(func=cmd_verify)

    data = command("data", "fetch (if needed) and verify the CSFCube files; with --corpus, download the full "
                           "corpus")
    data.add_argument("--path", action="store_true", help="print only the verified data folder (or corpus file)")
    data.add_argument("--corpus", action="store_true",
                      help="download abstracts-preds.zip (figshare 14796339; resumed, md5-checked) into the cache, "
                           "where the full protocol finds it without --corpus")
    data.set_defaults(func=cmd_data)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's own flush at exit meets no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or already closed
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # a reader that closed the pipe is found here, inside the handlers
    except KitError as exc:
        return report(exc)
    except BrokenPipeError:  # output piped into e.g. `head`, which has read enough: end quietly, as Unix tools do
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT
        print("evalkit: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # e.g. a disk that fills or a folder that vanishes while writing
        where = f"{exc.filename}: " if exc.filename else ""
        return report(f"{where}{exc.strerror or exc}")
    except RecursionError:  # an input nested deeper than any reader follows
        return report("an input file is nested too deeply to read; check the files given")
    except Exception as exc:  # sqlite (a cache file read-only, full or damaged) and other storage errors
        import sqlite3

        if not isinstance(exc, sqlite3.Error):
            raise
        return report(f"a cache file failed ({' '.join(str(exc).splitlines())}); free disk space, make the "
                      "cache writable, or delete the damaged file under EVALKIT_CACHE")
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
