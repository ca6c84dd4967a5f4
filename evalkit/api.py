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
from evalkit.data.protocols import protocol_collection
from evalkit.data.runstore import check_run_name
from evalkit.datasets import full_corpus, load_dataset
from evalkit.evaluation.evaluate import SCALE, compared_measures
from evalkit.evaluation.outcome import evaluate_tables, score_runs
from evalkit.evaluation.request import (
    CheckedEvaluation,
    EvaluationRequest,
    check_cutoff,
    check_measure_names,
    check_options,
    check_request,
)
from evalkit.evaluation.stats import check_test
from evalkit.models import adhoc, registry
from evalkit.models.adhoc import is_st
from evalkit.models.dense import TEMPLATE_FIELDS, check_template
from evalkit.models.identity import identity_and_reason
from evalkit.models.objects import as_scorer, prepare_object
from evalkit.pipeline.run_input import one_protocol, read_run, run_labels
from evalkit.pipeline.runner import RunSettings, bind, instructions_identity, obtain
from evalkit.pipeline.settings import check_execution

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
        """This evaluation's stored run of `variant` and its judgments as ``(ranx.Qrels, ranx.Run)``
        (`evalkit.integrations.ranx.from_evaluation`)."""
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
        test_settings = check_test(test, alpha, permutations, seed)  # the rule `evalkit evaluate --test` follows
        given = check_measure_names(measures)
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


def _reference_tables(reference, settings_of, collection: Collection, variants: Sequence[str], runs_dir: Path,
                      checked: CheckedEvaluation, models: registry.Registry) -> tuple[str, dict[str, pd.DataFrame]]:
    """(label, {variant: per-query table}) of the reference, scored as the model's runs are."""
    if isinstance(reference, Evaluation):
        missing = next((v for v in variants if v not in reference.runs), None)
        if missing is not None:
            raise RequestError("reference", f"{reference.name} has no run of variant {missing}; evaluate it on "
                               "that variant")
        return reference.name, {v: reference.per_query.loc[v] for v in variants}
    text = str(reference)
    settings = settings_of(BASE)
    judged = protocol_collection(collection, settings.protocol)
    if models.knows(text, settings.profile):
        tables = {}
        for variant in variants:
            run = obtain(bind(replace(settings_of(variant), model=text), collection, runs_dir, models)).run
            tables[variant] = score_runs(judged, {text: run}, checked)[text]
        return text, tables
    path = Path(text).expanduser()
    if not path.exists():
        raise RequestError("reference", f"neither a model of profile {settings.profile} nor a run file or folder; "
                           "name a model (evalkit models) or give a run", value=text)
    run, protocol, judged = read_run(path, None, collection, default=settings.protocol)
    label = run_labels([path])[path]
    one_protocol([(label, protocol), (settings.model, settings.protocol)], "reference")  # as `evalkit evaluate --runs`
    return label, dict.fromkeys(variants, score_runs(judged, {label: run}, checked)[label])


def _variants(collection: Collection, variants, instructions: str | None) -> list[str]:
    """The variants asked for (`evalkit.data.collection.select_variants`, the rule of every front end):
    default ``base``, or every variant of the instruction file."""
    if instructions is None:
        return list(select_variants(collection, variants))
    return list(select_variants(collection.with_instructions(Path(instructions)), variants, every=True,
                                offer_file=False))


def _instructions_file(instructions) -> str | None:
    if instructions is None:
        return None
    if not isinstance(instructions, str | Path) or not Path(instructions).expanduser().is_file():
        raise RequestError("instructions", "no such file; give a YAML file shaped as evalkit/config/instructions.yaml",
                           value=str(instructions))
    return str(Path(instructions).expanduser())


def evaluate(model, dataset: str = "csfcube", *, name: str | None = None, revision: str | None = None,
             variants: str | Sequence[str] | None = None, protocol: str = "pool", profile: str = "offline",
             reference=None, instructions: str | Path | None = None, seeds: Sequence[str] | None = None,
             queries: Sequence[str] | None = None, query_template: str = "{query}", doc_template: str = "{text}",
             empty_instruction_template: str = "{query}", label: str | None = None, role: str | None = None,
             measures: Sequence[str] | None = None, discount: str | None = None, k: int | None = None,
             aggregate: str = "folds", runs_dir: str | Path = "runs", first_stage: str | None = None,
             depth: int | None = None, corpus: str | None = None, test: str = "t", alpha: float = 0.05,
             permutations: int | None = None, seed: int | None = None, executor: str = "local",
             workers: int | None = None) -> Evaluation:
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
        name: The run's name in the run store and the tables (a model object only; default: a slug
            of its class or function name and 8 hex digits of its identity).
        revision: Your version of the model (a model object only). It is recorded beside the
            kit's fingerprint of everything the object reaches, and keys the runs alone where the
            fingerprint cannot be known (`evalkit.models.identity`); with neither, every call
            ranks again and ``notes`` says why.
        variants: One instruction variant or a list (``base``, ``generic``, ``definition``,
            ``paraphrase-1`` ..., ``aspect-subset``); default ``base``, or every variant of
            `instructions` when an instruction file is given.
        protocol: ``pool`` (each query reranks its judged pool without its seed; default),
            ``released`` (the pools as released, seed included), ``pooled`` (`first_stage` ranks
            the collection's documents, the model reranks each query's top `depth`) or ``full``
            (as ``pooled`` over a corpus file, `corpus`); `evalkit.data.protocols`.
        profile: The registry profile, ``offline`` (default) or ``paper``; it resolves model
            names, `reference` and `first_stage`.
        reference (str | Path | Evaluation | None): What the tests compare with, on the same
            settings: a registry model or ``st:`` spec (ranked here), a TREC run file or
            run-store folder of the same protocol (checked and judged as ``evalkit evaluate``
            does, `evalkit.pipeline.run_input.read_run`), or another `Evaluation`. Without it
            ``tests`` is None.
        instructions: Your instruction file, shaped as ``evalkit/config/instructions.yaml``
            (`evalkit.datasets.csfcube_variants`); its variants replace the kit's.
        seeds: Only the queries of these seed papers (CSFCube): a quick look. Not with `queries`.
        queries: Only these query ids. Not with `seeds`.
        query_template: How a model object's query text is made from ``{instruction}`` and
            ``{query}``; default ``{query}`` (the instruction unused).
        doc_template: How a document's text is made: ``{text}`` (title and abstract; default),
            ``{title}``, ``{abstract}``.
        empty_instruction_template: The query text when the instruction is blank (``{query}``
            only; default ``{query}``).
        label: The name the tables and the report show (a model object only; default `name`).
        role: How the model may be read (`evalkit.models.registry.ROLES`); default ``instructed``
            when it reads the instruction, else ``agnostic``.
        measures: ir_measures names and the kit's (``nDCG@10``, ``AP``, ``P@20``, ``p-MRR``,
            ``MAP_csfcube``, ...); default the collection's own list (CSFCube: NDCG@20, AP, RR,
            P@20, R@20, p-MRR, MAP_csfcube, nDCG_csfcube%20).
        discount: The default NDCG's discount on CSFCube: ``csfcube`` (the release's script;
            default) or ``trec`` (trec_eval's).
        k: The default measures' cutoff (default 20).
        aggregate: ``folds`` (the mean of the test folds' means where the collection has folds,
            p-MRR the mean of the stratum means; default) or ``mean`` (over queries).
        runs_dir: The run store's folder (default ``runs``).
        first_stage: The first-stage model of the ``pooled`` and ``full`` protocols (default the
            profile's).
        depth: How many first-stage documents are reranked under ``pooled`` and ``full``
            (default the profile's).
        corpus: The ``full`` protocol's corpus file (``abstracts-preds.zip``).
        executor: Where a whole corpus is encoded and searched: ``local`` (this process; default)
            or ``ray`` (a Ray cluster: the one ``RAY_ADDRESS`` names, else a local one started and
            stopped for the run; the ``cluster`` extra). The numbers do not depend on it.
        workers: Ray workers (default one per GPU of the cluster, else one per CPU).
        test: The paired test against `reference`: ``t`` (two-sided paired t-test; default) or
            ``fisher`` (Fisher's randomization test by sign flips), as ``evalkit evaluate --test``.
        alpha: The significance level of the marks and of ``better`` in ``tests`` (default 0.05).
        permutations: Fisher's test only: the sign flips drawn (100 to 10,000,000; default the
            kit's, `evalkit.evaluation.stats`).
        seed: Fisher's test only: the random seed of the sign flips (0 to 2**32-1).

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
    if not isinstance(dataset, str) or not dataset.strip():
        raise RequestError("dataset", "give a dataset spec, e.g. csfcube or beir:FOLDER (`evalkit --help` lists them)",
                           value=dataset)
    request = EvaluationRequest(dataset=dataset, protocol=protocol, measures=measures, discount=discount, k=k,
                                aggregate=aggregate, seeds=seeds, queries=queries, test=test, alpha=alpha,
                                permutations=permutations, seed=seed)
    check_options(request)  # the rules `evalkit evaluate` follows, worded as this function's arguments
    check_cutoff("depth", depth)
    check_execution(executor, workers)
    if profile not in registry.profiles():
        raise RequestError("profile", f"choose one of {', '.join(registry.profiles())}", value=profile)
    if not isinstance(runs_dir, str | Path) or not str(runs_dir).strip():
        raise RequestError("runs_dir", "give the folder of the run store", value=runs_dir)
    if Path(runs_dir).expanduser().exists() and not Path(runs_dir).expanduser().is_dir():
        raise RequestError("runs_dir", "is not a folder; give the folder of the run store (made if missing)",
                           value=str(runs_dir))
    instructions = _instructions_file(instructions)
    if isinstance(model, str):
        if name is not None or revision is not None:
            raise RequestError("name", "{name} and {revision} apply to a model object; a model named by a string is "
                               "a registry entry or an st: spec (write st:LOCATION;revision=REV)")
        registry.spec(model, profile)  # a registry name or st: spec: one-line error when unknown
        model_name, unseen = model, None
    else:
        found, unseen = _register(model, name, revision, profile, query_template, doc_template,
                                  empty_instruction_template, label, role)
        model_name = found.name
    models = registry.current() if isinstance(model, str) else registry.current().with_object(found)
    collection = load_dataset(dataset)
    checked = check_request(request, collection)
    if protocol == "full":  # the given file, else the one the dataset's scheme downloaded: the CLI's rule
        corpus = full_corpus(dataset, corpus)
    variants = _variants(collection, variants, instructions)
    runs_dir = Path(runs_dir)

    def settings_of(variant: str) -> RunSettings:
        return RunSettings(model=model_name, dataset=dataset, profile=profile, protocol=protocol, variant=variant,
                           first_stage=first_stage, depth=depth, queries=checked.queries, corpus=corpus,
                           instructions=instructions, executor=executor, workers=workers)

    judged = protocol_collection(collection, protocol)  # released: the seed judged too, as `evalkit evaluate`
    tables, folders = {}, {}
    for variant in variants:
        settings = settings_of(variant)
        obtained = obtain(bind(settings, collection, runs_dir, models))  # this object, not one found by name
        run, folders[variant] = obtained.run, obtained.folder
        tables[variant] = score_runs(judged, {model_name: run}, checked)[model_name]
    label_of, references = None, {}
    if reference is not None:
        label_of, references = _reference_tables(reference, settings_of, collection, variants, runs_dir, checked,
                                                 models)
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
    settings = {"dataset": dataset, "profile": profile, "protocol": protocol, "variants": variants,
                "measures": names, "aggregate": first.aggregate,
                "model_identity": registry.identity(models.spec(model_name, profile))}
    if twins:
        settings["same_as"] = twins  # {measure: the measure shown for it}: equal on every query here
    if instructions is not None:
        settings["instructions"] = instructions_identity(instructions)
    if unseen is not None:
        notes.append(unseen)
    elif settings["model_identity"] is None:
        notes.append(f"{model_name}: nothing pins this model's files (a hub id without a revision), so its runs are "
                     "made again every time and never reused; give a revision")
    return Evaluation(model_name, collection.name, per_query_table, measures_table, tests, folders, notes, settings,
                      pairs if reference is not None else {}, judged, checked)
