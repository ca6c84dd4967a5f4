"""The Python API: evaluate your own model in one call, through the kit's own runner, run store,
measures and statistics (the same path as ``evalkit run`` and ``evalkit evaluate``).

``evaluate(model, "csfcube", ...)`` takes

- a model object: a `SentenceTransformer`, any object with mteb's ``encode(inputs, *,
  task_metadata, hf_split, hf_subset, prompt_type)`` or a plain ``encode(list[str]) -> array``,
  a ``score(query, documents)`` callable, or a kit `Scorer` (`evalkit.models.objects`);
  or a model name: a registry entry (`evalkit models`) or an ``st:`` spec
  (`evalkit.models.adhoc`);
- a dataset spec (`evalkit.datasets.load_dataset`), protocol, variant(s) and optionally a
  user's instruction file (`evalkit.datasets.csfcube_variants`);

and returns an `Evaluation`: per-query values, the default measures table ``evalkit
evaluate`` prints (per stratum and all), and, with ``reference=`` (a registry model, an
``st:`` spec, a run file or run-store folder of the same protocol, checked and judged as ``evalkit
evaluate`` does, `evalkit.pipeline.run_input.read_run`, or another `Evaluation`), paired two-sided
tests against it (`evalkit.evaluation.compare`: ``delta`` the mean per-query difference, ``aggregate``
the fold aggregate) and `Evaluation.compare_table`. Runs are stored in the verified run
store with their sidecars (`evalkit.pipeline.runner.bind`, `obtain`), keyed by the model's identity: the
kit's fingerprint of everything the object reaches, with ``revision=`` beside it, or
``revision=`` alone where the walk cannot read a value; with neither, the run is made again
every time and ``result.notes`` says why (`evalkit.models.identity`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from evalkit.core.errors import DataError, RequestError
from evalkit.core.names import labelled, slug
from evalkit.data.collection import BASE, Collection, select_variants
from evalkit.data.protocols import DEFAULT_PROTOCOL, protocol_collection
from evalkit.data.runs import Run
from evalkit.data.runstore import check_run_name
from evalkit.datasets import full_corpus, load_dataset
from evalkit.evaluation.evaluate import SCALE, compared_measures
from evalkit.evaluation.outcome import Outcome, evaluate_tables, score_runs
from evalkit.evaluation.request import (
    CheckedEvaluation,
    EvaluationRequest,
    check_options,
    check_request,
)
from evalkit.models import adhoc, registry
from evalkit.models.adhoc import is_st
from evalkit.models.dense import TEMPLATE_FIELDS, check_template
from evalkit.models.identity import identity_and_reason
from evalkit.models.objects import as_scorer, prepare_object
from evalkit.pipeline import runner
from evalkit.pipeline.run_input import one_protocol, read_run, run_labels, same_file
from evalkit.pipeline.settings import RUN_FIELDS, RunRequest, RunSettings, check_run_request, instructions_identity

ROLES_READING = "instructed"


@dataclass
class Evaluation:
    """What `evaluate` returns. `per_query`: one row per variant and query (stratum, fold, each
    measure; fractions); `table`: one row per variant and measure, a column per stratum and
    ``all`` (the CLI's table; fractions, printed x100); `tests`: with a reference, one row per
    variant, measure, stratum and pair of runs (`evalkit.evaluation.compare.COLUMNS`: ``aggregate`` the
    fold aggregate, ``delta`` the mean per-query difference its ``t`` and ``p`` test, ``p_holm``
    and ``better`` what the table's marks read); `runs`: each
    variant's run-store folder; `notes`: where the fold aggregate is undefined on the evaluated
    queries, a test has no p-value, or the kit cannot key the model's runs.
    `compare_table()` gives the runs x measures table (`evalkit.evaluation.compare_table`)."""

    name: str
    dataset: str
    per_query: pd.DataFrame
    table: pd.DataFrame
    tests: pd.DataFrame | None
    runs: dict[str, Path]
    notes: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    compared: dict = field(default_factory=dict, repr=False)  # variant -> {run: per-query table}, reference first
    collection: Collection | None = field(default=None, repr=False)  # as the protocol judges it
    checked: CheckedEvaluation | None = field(default=None, repr=False)  # the request the tables answer
    made: dict[str, Run] = field(default_factory=dict, repr=False)  # variant -> the run this evaluation ranked

    def run_of(self, variant: str = BASE) -> Run:
        """The run this evaluation ranked (or reused) under `variant`, as it was scored: what `to_ranx`
        converts. Its folder in `runs` may hold another run later (a later evaluation of the same name),
        so this is never read back from the folder."""
        if not isinstance(variant, str) or variant not in self.made:
            raise RequestError("variant", f"this result has {', '.join(self.made) or 'no run it holds'}",
                               value=variant)
        return self.made[variant]

    def __str__(self) -> str:
        two = lambda v: f"{v:.2f}"  # noqa: E731
        twins = set(self.settings.get("same_as", {}))  # printed once, under the measure they equal
        table = self.table[~self.table.index.get_level_values("measure").isin(twins)]
        parts = [f"{self.name} on {self.dataset}, values x{SCALE}",
                 (SCALE * table).to_string(float_format=two, na_rep="-")]
        if twins:
            parts.append(f"same_as: {', '.join(f'{t}={k}' for t, k in self.settings['same_as'].items())} "
                         "(equal on every query here)")
        if self.tests is not None:
            shown = self.tests[~self.tests["measure"].isin(twins)]
            shown = shown.assign(aggregate=SCALE * shown["aggregate"], delta=SCALE * shown["delta"])
            fisher = self.checked is not None and self.checked.test.test == "fisher"
            tests, statistic = ("Fisher's paired randomization tests", "the test") if fisher else \
                ("paired two-sided t-tests", "t")
            parts += [f"{tests} against the reference (x{SCALE}: aggregate = the table's value, "
                      f"delta = the mean per-query difference that {statistic} tests):",
                      shown.to_string(index=False, formatters={"aggregate": two, "delta": two, "t": two,
                                                               "p": lambda v: f"{v:#.3g}",
                                                               "p_holm": lambda v: f"{v:#.3g}"}, na_rep="-")]
        return "\n".join(parts + [f"note: {n}" for n in self.notes])

    def to_ranx(self, variant: str = BASE):
        """The run this evaluation made of `variant` (`run_of`, not what its folder holds now) and its
        judgments as ``(ranx.Qrels, ranx.Run)`` (`evalkit.integrations.ranx.from_evaluation`)."""
        from evalkit.integrations import ranx  # lazy: ranx (and numba) is a heavy optional library

        return ranx.from_evaluation(self, variant)

    def compare_table(self, *others: Evaluation, variant: str | None = None, measures: Sequence[str] | None = None,
                      test: str = "t", alpha: float = 0.05, permutations: int | None = None, seed: int | None = None,
                      format: str | None = None):
        """The runs x measures table (`evalkit.evaluation.compare_table.ComparisonTable`; ``format=`` text,
        markdown or latex gives its text) of the reference, this model and `others` (more
        `evaluate` results on the same dataset and queries), on `variant` (default: the first)."""
        variants = list(self.runs)
        variant = variant or variants[0]
        if variant not in self.runs:
            raise RequestError("variant", f"this result has {', '.join(variants)}", value=variant)
        asked = EvaluationRequest(test=test, alpha=alpha, permutations=permutations, seed=seed, measures=measures)
        test_settings, given = asked.settings(), asked.measures  # the rules `evalkit evaluate` follows
        tables = dict(self.compared.get(variant) or {self.name: self.per_query.loc[variant]})
        for other in others:
            if not isinstance(other, Evaluation):
                raise RequestError("other", f"compare_table takes other evaluate results; got a {type(other).__name__}")
            if other.dataset != self.dataset or variant not in other.runs:
                raise DataError(other.name, f"evaluated on {other.dataset} {', '.join(other.runs)}; compare "
                                f"results of {self.dataset} variant {variant}")
            if other.name in tables:
                raise RequestError("other", f"{other.name} is in the table already; give each run once")
            tables[other.name] = other.per_query.loc[variant]
        if len(tables) < 2:
            raise RequestError("reference",
                               "compare_table needs two runs: evaluate with {reference} or pass other results")
        twins = set(self.settings.get("same_as", {})) if given is None else set()
        names = [m for m in compared_measures(list(given or self.settings["measures"])) if m not in twins]
        unknown = next((m for m in names if m not in self.settings["measures"]), None)
        if unknown is not None:
            raise RequestError("measures", f"{unknown} was not evaluated; choose from "
                               f"{', '.join(self.settings['measures'])}")
        outcome = evaluate_tables(self.collection, tables, replace(self.checked, test=test_settings))
        table = outcome.table(names)
        return table if format is None else table.format(format)


def _model_name(model, name: str | None, identity: dict | None) -> str:
    """The user's name, else a slug of the object's class or function name and 8 hex digits of
    its identity (so two different models never share a run folder)."""
    if name is not None:
        if is_st(name):
            raise RequestError("name", "st: names a sentence-transformers location; give the object another name",
                               value=name)
        return check_run_name(name)
    base = getattr(model, "__name__", None) or type(model).__name__
    if not identity:
        return f"{slug(base, 'model')}-anon"
    return labelled(base, json.dumps(identity, sort_keys=True), "model")  # the kit's one naming rule


def register_model(model, name: str | None = None, *, revision: str | None = None, profile: str = "offline",
                   query_template: str = "{query}", doc_template: str = "{text}",
                   empty_instruction_template: str = "{query}", label: str | None = None,
                   role: str | None = None) -> str:
    """Make a Python model object rankable by name in this process (the study notebooks' MODELS,
    `evaluate`); returns the name. Its identity is the kit's fingerprint of everything it
    reaches, with `revision` beside it; `revision` alone where the fingerprint cannot be known
    (`evalkit.models.identity`). `evaluate` does not need this: it ranks the object it is given."""
    found = _register(model, name, revision, profile, query_template, doc_template, empty_instruction_template,
                      label, role)[0]
    registry.register_model(found)  # the process's registrations (`registry.PROCESS`)
    return found.name


def _register(model, name, revision, profile, query_template, doc_template, empty_instruction_template, label,
              role) -> tuple[adhoc.PythonModel, str | None]:
    """(the object under its name, note): the checks of `register_model`, and why the kit could not
    fingerprint the model (or None). Nothing is registered."""
    for argument, template in (("query_template", query_template), ("doc_template", doc_template),
                               ("empty_instruction_template", empty_instruction_template)):
        check_template(f"{argument}=", template, TEMPLATE_FIELDS[argument])
    prepare_object(model)
    identity, why = identity_and_reason(model, revision)
    name = _model_name(model, name, identity)
    if name in registry.model_names(profile):
        raise RequestError("name", f"is a model of the registry (profile {profile}); give your model another name",
                               value=name)
    templates = {"query_template": query_template, "doc_template": doc_template,
                 "empty_instruction_template": empty_instruction_template}
    if hasattr(model, "encode") and not hasattr(model, "score"):
        reads = "{instruction}" in query_template
    else:  # a kit Scorer says whether it reads the instruction; a score() callable is assumed to
        reads = bool(getattr(model, "reads_instruction", True))
    role = role or (ROLES_READING if reads else "agnostic")
    if role not in registry.ROLES:
        raise RequestError("role", f"choose one of {', '.join(registry.ROLES)}", value=role)
    as_scorer(model, name, identity, templates)  # refuses an object the kit cannot rank, before any work
    found = adhoc.PythonModel(name, model, identity, label or name, role, templates)
    return found, None if why is None else f"{name}: {why}"


def _reference_tables(reference, request: _Request) -> tuple[str, dict[str, pd.DataFrame]]:
    """(label, {variant: per-query table}) of the reference, scored as the model's runs are."""
    variants = request.variants
    if isinstance(reference, Evaluation):
        missing = next((v for v in variants if v not in reference.runs), None)
        if missing is not None:
            raise RequestError("reference", f"{reference.name} has no run of variant {missing}; evaluate it on "
                               "that variant")
        return reference.name, {v: reference.per_query.loc[v] for v in variants}
    text = str(reference)
    settings = request.settings(BASE)
    if request.models.knows(text, settings.profile):
        tables = {}
        for variant in variants:
            run = _obtain(request, variant, model=text).run
            tables[variant] = score_runs(request.judged, {text: run}, request.checked)[text]
        return text, tables
    path = Path(text).expanduser()
    if not path.exists():
        raise RequestError("reference", f"neither a model of profile {settings.profile} nor a run file or folder; "
                           "name a model (evalkit models) or give a run", value=text)
    label = run_labels([path])[path]
    runs, _, judged = read_runs([path], {path: label}, request.collection, default=settings.protocol,
                                beside=[(settings.model, settings.protocol)], field="reference")
    return label, dict.fromkeys(variants, score_runs(judged, runs, request.checked)[label])


def _variants(collection: Collection, variants, instructions: str | None) -> list[str]:
    """The variants asked for (`evalkit.data.collection.select_variants`, the rule of every front end):
    default ``base``, or every variant of the instruction file."""
    if instructions is None:
        return list(select_variants(collection, variants))
    return list(select_variants(collection.with_instructions(Path(instructions)), variants, every=True,
                                offer_file=False))


# --- the one request: the model, the dataset, a run request and an evaluation request ------------------

MODEL_FIELDS = ("name", "revision", "query_template", "doc_template", "empty_instruction_template", "label", "role")
EVALUATION_FIELDS = tuple(f for f in EvaluationRequest.ORDER if f != "dataset")  # the dataset: its own
KEYWORDS = (*MODEL_FIELDS, *RUN_FIELDS, *(f for f in EVALUATION_FIELDS if f not in RUN_FIELDS))
MODEL_DEFAULTS = {"query_template": "{query}", "doc_template": "{text}", "empty_instruction_template": "{query}"}


def requests_of(dataset: str, run: RunRequest | None = None, evaluation: EvaluationRequest | None = None,
                **keywords) -> tuple[RunRequest, EvaluationRequest, dict]:
    """(the run request, the evaluation request, a model object's options) of `evaluate`'s
    arguments: each request as given, else the defaults, filled by `keywords` (`KEYWORDS`: a model
    object's `MODEL_FIELDS`, the run request's fields, the evaluation request's; ``protocol`` is
    both requests'). A field set in a request and by a keyword too, an unknown keyword, or two
    requests naming different protocols: one line. Nothing is checked here beyond that
    (`check_run_request`, `evalkit.evaluation.request.check_request`)."""
    for argument, given, kind in (("run", run, RunRequest), ("evaluation", evaluation, EvaluationRequest)):
        if given is not None and not isinstance(given, kind):
            raise RequestError(argument, f"a {type(given).__name__} is not a {kind.__name__}; give "
                               f"evalkit.{kind.__name__}(...) or its fields as keywords")
    unknown = next((k for k in keywords if k not in KEYWORDS), None)
    if unknown is not None:
        raise RequestError(unknown, f"is no argument of evaluate; give one of {', '.join(KEYWORDS)}")
    run_fields = {k: v for k, v in keywords.items() if k in RUN_FIELDS}
    evaluation_fields = {k: v for k, v in keywords.items() if k in EVALUATION_FIELDS}
    for argument, given, named in (("run", run, run_fields), ("evaluation", evaluation, evaluation_fields)):
        if given is not None and named:
            raise RequestError(next(iter(named)), f"is a field of the {argument} request given; set it there or "
                               f"as a keyword, not both")
    evaluation = evaluation.model_copy(update=evaluation_fields) if evaluation is not None else \
        EvaluationRequest(**evaluation_fields)  # built (so checked) first: `evalkit evaluate`'s rules come first
    run = run.model_copy(update=run_fields) if run is not None else RunRequest(**run_fields)
    if evaluation.protocol is not None and evaluation.protocol != run.protocol:
        raise RequestError("protocol", f"the run request says {run.protocol!r} and the evaluation request "
                           f"{evaluation.protocol!r}; give one protocol", value=evaluation.protocol)
    model_options = MODEL_DEFAULTS | {k: v for k, v in keywords.items() if k in MODEL_FIELDS}
    return run, evaluation.model_copy(update={"dataset": dataset, "protocol": run.protocol}), model_options


@dataclass(frozen=True)
class _Request:
    """One request of `evaluate` or `store_runs`, each part checked once: the model's name and the
    registry that ranks it (a Python object attached), the collection and the same as its protocol
    judges it, the checked run and evaluation requests, the variants, and why the kit cannot key
    the model's runs (or None)."""

    model: str
    models: registry.Registry
    collection: Collection
    judged: Collection
    run: RunRequest
    checked: CheckedEvaluation
    variants: tuple[str, ...]
    unseen: str | None

    def settings(self, variant: str, model: str | None = None) -> RunSettings:
        """The run of `model` (default the request's) under `variant`."""
        run = self.run
        return RunSettings(model=model or self.model, dataset=self.checked.request.dataset, profile=run.profile,
                           protocol=run.protocol, variant=variant, prompt=run.prompt, first_stage=run.first_stage,
                           depth=run.depth, queries=self.checked.queries, corpus=run.corpus,
                           instructions=run.instructions, index_dtype=run.index_dtype, executor=run.executor,
                           workers=run.workers)


def _checked(model, dataset: object, run: RunRequest | None, evaluation: EvaluationRequest | None,
             keywords: dict) -> _Request:
    """Every argument of `evaluate` checked, each by its one rule, before any ranking."""
    if not isinstance(dataset, str) or not dataset.strip():
        raise RequestError("dataset", "give a dataset spec, e.g. csfcube or beir:FOLDER (`evalkit --help` lists them)",
                           value=dataset)
    run, evaluation, options = requests_of(dataset, run, evaluation, **keywords)
    check_options(evaluation)  # the rules `evalkit evaluate` follows, worded as this function's arguments
    run = check_run_request(run)  # the rules `evalkit run` follows (and `bind`, for every run)
    if isinstance(model, str):
        given = next((k for k in MODEL_FIELDS if options.get(k, MODEL_DEFAULTS.get(k)) != MODEL_DEFAULTS.get(k)),
                     None)
        if given in ("name", "revision"):
            raise RequestError("name", "{name} and {revision} apply to a model object; a model named by a string is "
                               "a registry entry or an st: spec (write st:LOCATION;revision=REV)")
        if given is not None:
            raise RequestError(given, "applies to a model object; a model named by a string takes its settings from "
                               "the registry entry or the st: spec (st:LOCATION;query_template=...)")
        registry.spec(model, run.profile)  # a registry name or st: spec: one-line error when unknown
        name, unseen, models = model, None, registry.current()
    else:
        found, unseen = _register(model, options.get("name"), options.get("revision"), run.profile,
                                  options["query_template"], options["doc_template"],
                                  options["empty_instruction_template"], options.get("label"), options.get("role"))
        name, models = found.name, registry.current().with_object(found)
    collection = load_dataset(dataset)
    checked = check_request(evaluation, collection)
    if run.protocol == "full":  # the given file, else the one the dataset's scheme downloaded: every front end's rule
        run = run.model_copy(update={"corpus": full_corpus(dataset, run.corpus)})
    variants = tuple(_variants(collection, run.variants, run.instructions))
    judged = protocol_collection(collection, run.protocol)  # released: the seed judged too, as `evalkit evaluate`
    return _Request(name, models, collection, judged, run, checked, variants, unseen)


def _obtain(request: _Request, variant: str, *, model: str | None = None, read: bool = True):
    """The stored run of `model` (default the request's) under `variant`: reused when it matches, else
    made and stored (`evalkit.pipeline.runner.obtain`, the one way to a run)."""
    bound = runner.bind(request.settings(variant, model), request.collection, Path(request.run.runs_dir),
                        request.models)  # this object, not one found by name
    return runner.obtain(bound, read=read)


def store_runs(model, dataset: str = "csfcube", run: RunRequest | None = None,
               evaluation: EvaluationRequest | None = None, **keywords) -> dict[str, Path]:
    """Rank `dataset` with `model` under each variant and store the runs, checked as `evaluate`
    checks them (its arguments, the same rules); returns each variant's run-store folder
    (``evalkit run``: a matching stored run is reused, not read). Only the evaluation request's
    query selection (``seeds``, ``queries``) shapes the runs."""
    request = _checked(model, dataset, run, evaluation, keywords)
    return {variant: _obtain(request, variant, read=False).folder for variant in request.variants}


@dataclass(frozen=True)
class RunsEvaluation:
    """Runs a user gives, evaluated (`evaluate_runs`): the `Outcome` (the first run the reference of its
    tests), each run's label in order, and the one protocol they were judged under."""

    outcome: Outcome
    labels: list[str]
    protocol: str


def read_runs(paths: Sequence[Path], labels: dict[Path, str], collection: Collection, *, name: str | None = None,
              protocol: str | None = None, default: str = DEFAULT_PROTOCOL, beside: Sequence[tuple[str, str]] = (),
              field: str = "runs") -> tuple[dict[str, Run], str, Collection]:
    """({label: run}, their one protocol, the collection as it judges them) of runs a user gives
    (``evalkit evaluate --runs``, `evaluate`'s ``reference=``): each read and checked
    (`evalkit.pipeline.run_input.read_run`), all of one protocol with the runs `beside` them
    (`one_protocol`; `field` names the argument an error is about)."""
    runs, made, judged = {}, [], collection
    for path in paths:
        runs[labels[path]], used, judged = read_run(path, name, collection, protocol, default=default)
        made.append((labels[path], used))
    return runs, one_protocol([*made, *beside], field), judged


def evaluate_runs(runs: Sequence[str | Path], evaluation: EvaluationRequest | None = None, *, name: str | None = None,
                  **keywords) -> RunsEvaluation:
    """Evaluate runs a user gives (TREC run files, run-store folders, or with `name` a folder of the
    collection's own ranked files) under `evaluation` (or keywords that fill it; its ``protocol``
    None: each run's recorded one), the first the reference of the paired tests: ``evalkit evaluate
    --runs``. Each argument is checked by the rules `evaluate` follows, before anything is read."""
    known = list(EvaluationRequest.ORDER)
    unknown = next((k for k in keywords if k not in known), None)
    if unknown is not None:
        raise RequestError(unknown, f"is no argument of evaluate_runs; give one of {', '.join(known)}")
    if evaluation is not None and keywords:
        raise RequestError(next(iter(keywords)), "is a field of the evaluation request given; set it there or as a "
                           "keyword, not both")
    evaluation = evaluation if evaluation is not None else EvaluationRequest(**keywords)
    if not isinstance(evaluation, EvaluationRequest):
        raise RequestError("evaluation", f"a {type(evaluation).__name__} is not an EvaluationRequest; give "
                           "evalkit.EvaluationRequest(...) or its fields as keywords")
    check_options(evaluation)  # every rule before anything is read
    runs = [runs] if isinstance(runs, str | Path) else runs
    if not isinstance(runs, Sequence) or not runs or not all(isinstance(r, str | Path) for r in runs):
        raise RequestError("runs", "give a run file or folder, or a list of them", value=runs)
    paths = [Path(p) for p in runs]
    for path in paths:
        if not path.exists():
            raise DataError(path, "no such run file or directory; check {runs}")
    repeated = next((p for p in paths if sum(same_file(p, q) or p == q for q in paths) > 1), None)
    if repeated is not None:
        raise RequestError("runs", "given twice; list each run once", value=str(repeated))
    if len(paths) > 1 and name:
        raise RequestError("name", "picks the official files of one folder; compare run files or run-store folders")
    collection = load_dataset(evaluation.dataset)
    checked = check_request(evaluation, collection)
    labels = run_labels(paths) if len(paths) > 1 else {paths[0]: name or str(paths[0])}
    found, protocol, judged = read_runs(paths, labels, collection, name=name, protocol=evaluation.protocol)
    outcome = evaluate_tables(judged, score_runs(judged, found, checked), checked)
    return RunsEvaluation(outcome, [labels[p] for p in paths], protocol)


def evaluate(model, dataset: str = "csfcube", run: RunRequest | None = None,
             evaluation: EvaluationRequest | None = None, *, reference=None, **keywords) -> Evaluation:
    """Rank `dataset` with `model` under each variant, store the runs in the run store, and evaluate
    them as ``evalkit evaluate`` does: per-query values, the measures table and, with a
    `reference`, paired two-sided tests against it.

    Args:
        model (object | str): What ranks. A `SentenceTransformer`; an object with mteb's ``encode(inputs, *,
            task_metadata, hf_split, hf_subset, prompt_type)`` (called with a DataLoader of
            ``{"text": [...]}`` batches) or a plain ``encode(list[str]) -> array`` (vectors
            normalised, cosine); a ``score(query, documents)`` callable (``query.text``,
            ``query.instruction``; documents with ``doc_id``, ``title``, ``text``; it returns
            ``{doc_id: score}`` or one score per document); a kit `Scorer`
            (`evalkit.models.objects`); or a name: a registry model (``evalkit models``) or an
            ``st:PATH_OR_HUB_ID`` spec (`evalkit.models.adhoc`).
        dataset: The dataset spec (`evalkit.datasets.load_dataset`): ``csfcube``,
            ``beir:FOLDER``, ``followir:FOLDER``, ``instructir:FOLDER`` or ``irds:ID``.
        run (RunRequest | None): How the runs are made (`evalkit.pipeline.settings.RunRequest`, the
            request ``evalkit run``'s options fill): profile, protocol, variants, instruction file,
            prompt, first stage and depth, corpus, index dtype, executor and workers, run store.
            Default: its fields' defaults, filled by `keywords`.
        evaluation (EvaluationRequest | None): How they are evaluated
            (`evalkit.evaluation.request.EvaluationRequest`, the request ``evalkit evaluate``'s
            options fill): measures, discount, k, aggregate, the paired test, p-MRR's tie order,
            the queries (``seeds`` or ``queries``). Its dataset is `dataset`, its protocol the run
            request's. Default: its fields' defaults, filled by `keywords`.
        reference (str | Path | Evaluation | None): What the tests compare with, on the same
            settings: a registry model or ``st:`` spec (ranked here), a TREC run file or
            run-store folder of the same protocol (checked and judged as ``evalkit evaluate``
            does, `evalkit.pipeline.run_input.read_run`), or another `Evaluation`. Without it
            ``tests`` is None.
        **keywords (object): The fields of the model object's options, of `run` and of `evaluation`, by
            name (below); ``protocol`` sets both requests'. A field given both in a request and as
            a keyword, or a name that is none of them, is refused in one line.

    Other Parameters:
        name (str | None): The run's name in the run store and the tables (a model object only; default: a slug
            of its class or function name and 8 hex digits of its identity).
        revision (str | None): Your version of the model (a model object only). It is recorded beside the
            kit's fingerprint of everything the object reaches, and keys the runs alone where the
            fingerprint cannot be known (`evalkit.models.identity`); with neither, every call
            ranks again and ``notes`` says why.
        variants (str | Sequence[str] | None): One instruction variant or a list (``base``, ``generic``, ``definition``,
            ``paraphrase-1`` ..., ``aspect-subset``); default ``base``, or every variant of
            `instructions` when an instruction file is given.
        protocol (str): ``pool`` (each query reranks its judged pool without its seed; default),
            ``released`` (the pools as released, seed included), ``pooled`` (`first_stage` ranks
            the collection's documents, the model reranks each query's top `depth`) or ``full``
            (as ``pooled`` over a corpus file, `corpus`); `evalkit.data.protocols`.
        profile (str): The registry profile, ``offline`` (default) or ``paper``; it resolves model
            names, `reference` and `first_stage`.
        instructions (str | Path | None): Your instruction file, shaped as ``evalkit/config/instructions.yaml``
            (`evalkit.datasets.csfcube_variants`); its variants replace the kit's.
        seeds (Sequence[str] | None): Only the queries of these seed papers (CSFCube): a quick look. Not with `queries`.
        queries (Sequence[str] | None): Only these query ids. Not with `seeds`.
        query_template (str): How a model object's query text is made from ``{instruction}`` and
            ``{query}``; default ``{query}`` (the instruction unused).
        doc_template (str): How a document's text is made: ``{text}`` (title and abstract; default),
            ``{title}``, ``{abstract}``.
        empty_instruction_template (str): The query text when the instruction is blank (``{query}``
            only; default ``{query}``).
        label (str | None): The name the tables and the report show (a model object only; default `name`).
        role (str | None): How the model may be read (`evalkit.models.registry.ROLES`); default ``instructed``
            when it reads the instruction, else ``agnostic``.
        measures (Sequence[str] | None): ir_measures names and the kit's (``nDCG@10``, ``AP``, ``P@20``, ``p-MRR``,
            ``MAP_csfcube``, ...); default the collection's own list (CSFCube: NDCG@20, AP, RR,
            P@20, R@20, p-MRR, MAP_csfcube, nDCG_csfcube%20).
        discount (str | None): The default NDCG's discount on CSFCube: ``csfcube`` (the release's script;
            default) or ``trec`` (trec_eval's).
        k (int | None): The default measures' cutoff (default 20).
        aggregate (str): ``folds`` (the mean of the test folds' means where the collection has folds,
            p-MRR the mean of the stratum means; default) or ``mean`` (over queries).
        runs_dir (str | Path): The run store's folder (default ``runs``).
        prompt (str | None): A prompt appended to every query text after one space (Promptriever's rule).
        index_dtype (str): The whole-corpus vector index's dtype: ``float32`` (default) or ``float16``
            (half the disk; the ranking is then that of float16-rounded document vectors).
        first_stage (str | None): The first-stage model of the ``pooled`` and ``full`` protocols (default the
            profile's).
        depth (int | None): How many first-stage documents are reranked under ``pooled`` and ``full``
            (default the profile's). `first_stage` and `depth` are refused under the pool
            protocols, as ``evalkit run`` refuses them (`evalkit.pipeline.settings.check_stage`).
        corpus (str | Path | None): The ``full`` protocol's corpus file (``abstracts-preds.zip``).
        executor (str): Where a whole corpus is encoded and searched: ``local`` (this process; default)
            or ``ray`` (a Ray cluster: the one ``RAY_ADDRESS`` names, else a local one started and
            stopped for the run; the ``cluster`` extra). The numbers do not depend on it.
        workers (int | None): Ray workers (default one per GPU of the cluster, else one per CPU).
        test (str): The paired test against `reference`: ``t`` (two-sided paired t-test; default) or
            ``fisher`` (Fisher's randomization test by sign flips), as ``evalkit evaluate --test``.
        alpha (float): The significance level of the marks and of ``better`` in ``tests`` (default 0.05).
        permutations (int | None): Fisher's test only: the sign flips drawn (100 to 10,000,000; default the
            kit's, `evalkit.evaluation.stats`).
        seed (int | None): Fisher's test only: the random seed of the sign flips (0 to 2**32-1).
        pmrr_ties (str): p-MRR's order of tied scores: ``kit`` (document id ascending; default) or
            ``mteb`` (as mteb's evaluator), as ``evalkit evaluate --pmrr-ties``.

    Returns:
        An `Evaluation`: ``per_query`` (one row per variant and query), ``table`` (per variant and
        measure, a column per stratum and ``all``; fractions), ``tests`` (with a `reference`: one
        row per variant, measure, stratum and run: ``aggregate`` the table's value, ``delta`` the
        mean per-query difference that ``t`` and ``p`` test, ``against`` the run it is tested
        against, Holm's ``p_holm`` over every pair of runs of one measure and stratum, ``better``
        the run significantly better (``p_holm`` below `alpha`), ``n`` the paired units, ``note``
        why a p-value is missing), ``runs`` (each variant's run-store folder),
        ``notes``, ``settings``; `Evaluation.compare_table` gives the runs x measures table.

    Raises:
        RequestError: An argument the kit refuses (one line naming it and the fix), before any
            ranking.
        KitError: A model, run or dataset that cannot be used (one line).
    """
    request = _checked(model, dataset, run, evaluation, keywords)
    model_name, checked, judged, variants = request.model, request.checked, request.judged, list(request.variants)
    tables, folders, made = {}, {}, {}
    for variant in variants:
        obtained = _obtain(request, variant)
        made[variant], folders[variant] = obtained.run, obtained.folder
        tables[variant] = score_runs(judged, {model_name: obtained.run}, checked)[model_name]
    label_of, references = None, {}
    if reference is not None:
        label_of, references = _reference_tables(reference, request)
        if label_of == model_name:
            raise RequestError("reference", "the model evaluated cannot be its own reference; name another model "
                               "or run", value=label_of)
    pairs = {v: ({label_of: references[v]} if reference is not None else {}) | {model_name: tables[v]}
             for v in variants}
    outcomes = {v: evaluate_tables(judged, pairs[v], checked) for v in variants}  # the one evaluation
    first = outcomes[variants[0]]
    twins = {t: kept for t, kept in first.twins.items() if all(o.twins.get(t) == kept for o in outcomes.values())}
    names = list(checked.names)
    rows = [{"variant": v, "measure": m, **outcome.summary(model_name)[m]} for v, outcome in outcomes.items()
            for m in names]
    measures_table = pd.DataFrame(rows).set_index(["variant", "measure"])
    per_query_table = pd.concat(tables, names=["variant", "qid"])
    notes = sorted({n for outcome in outcomes.values() for n in outcome.notes(model_name)})
    tests = None
    if reference is not None:
        tests = pd.concat([outcome.tests().assign(variant=v) for v, outcome in outcomes.items()], ignore_index=True)
        tests = tests[["variant", *[c for c in tests.columns if c != "variant"]]]
        blank = tests[(tests["note"] != "") & (tests["note"] != "reference")]
        notes += [f"tests: {count} row(s) without a p-value: {why}" for why, count in
                  blank["note"].str.split(";").str[0].value_counts().sort_index().items()]
    profile, protocol = request.run.profile, request.run.protocol
    settings = {"dataset": dataset, "profile": profile, "protocol": protocol, "variants": variants,
                "measures": names, "aggregate": first.aggregate,
                "model_identity": registry.identity(request.models.spec(model_name, profile))}
    if twins:
        settings["same_as"] = twins  # {measure: the measure shown for it}: equal on every query here
    if request.run.instructions is not None:
        settings["instructions"] = instructions_identity(request.run.instructions)
    if request.unseen is not None:
        notes.append(request.unseen)
    elif settings["model_identity"] is None:
        notes.append(f"{model_name}: nothing pins this model's files (a hub id without a revision), so its runs are "
                     "made again every time and never reused; give a revision")
    return Evaluation(model_name, request.collection.name, per_query_table, measures_table, tests, folders, notes,
                      settings, pairs if reference is not None else {}, judged, checked, made)
