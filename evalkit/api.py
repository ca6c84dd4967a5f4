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
store with their sidecars (`evalkit.pipeline.runner.ensure_run`), keyed by the model's identity: the
kit's fingerprint of everything the object reaches, with ``revision=`` beside it, or
``revision=`` alone where the walk cannot read a value; with neither, the run is made again
every time and ``result.notes`` says why (`evalkit.models.identity`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from evalkit.core.errors import KitError
from evalkit.data.collection import BASE, Collection, check_query_ids, queries_of_seeds
from evalkit.data.protocols import PROTOCOLS, protocol_collection
from evalkit.data.runstore import check_run_name
from evalkit.datasets import load_dataset
from evalkit.evaluation.compare import compare
from evalkit.evaluation.compare_table import compare_table
from evalkit.evaluation.evaluate import (
    AGGREGATIONS,
    DISCOUNTS,
    SCALE,
    check_listed_once,
    check_measures,
    compared_measures,
    computed_measures,
    default_measures,
    fold_notes,
    per_query,
    shown_once,
    summary_of,
)
from evalkit.evaluation.stats import fisher_settings
from evalkit.models import adhoc, registry
from evalkit.models.adhoc import is_st
from evalkit.models.dense import TEMPLATE_FIELDS, check_template
from evalkit.models.identity import identity_and_reason
from evalkit.models.objects import as_scorer, prepare_object
from evalkit.pipeline.run_input import read_run
from evalkit.pipeline.runner import RunSettings, ensure_run, instructions_identity, run_folder

ROLES_READING = "instructed"


@dataclass
class Evaluation:
    """What `evaluate` returns. `per_query`: one row per variant and query (stratum, fold, each
    measure; fractions); `table`: one row per variant and measure, a column per stratum and
    ``all`` (the CLI's table; fractions, printed x100); `tests`: with a reference, one row per
    variant, measure, stratum and run (`evalkit.evaluation.compare.COLUMNS`: ``aggregate`` the fold
    aggregate, ``delta`` the mean per-query difference its ``t`` and ``p`` test); `runs`: each
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
    collection: Collection | None = field(default=None, repr=False)

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
            parts += [f"paired two-sided t-tests against the reference (x{SCALE}: aggregate = the table's value, "
                      "delta = the mean per-query difference that t tests):",
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
            raise KitError(f"variant={variant!r}: this result has {', '.join(variants)}")
        tables = dict(self.compared.get(variant) or {self.name: self.per_query.loc[variant]})
        for other in others:
            if not isinstance(other, Evaluation):
                raise KitError(f"compare_table takes other evaluate results; got a {type(other).__name__}")
            if other.dataset != self.dataset or variant not in other.runs:
                raise KitError(f"{other.name}: evaluated on {other.dataset} {', '.join(other.runs)}; compare "
                               f"results of {self.dataset} variant {variant}")
            if other.name in tables:
                raise KitError(f"{other.name} is in the table already; give each run once")
            tables[other.name] = other.per_query.loc[variant]
        if len(tables) < 2:
            raise KitError("compare_table needs two runs: evaluate with reference= or pass other results")
        twins = set(self.settings.get("same_as", {})) if measures is None else set()
        names = [m for m in compared_measures(measures or self.settings["measures"]) if m not in twins]
        unknown = next((m for m in names if m not in self.settings["measures"]), None)
        if unknown is not None:
            raise KitError(f"measures= {unknown!r} was not evaluated; choose from "
                           f"{', '.join(self.settings['measures'])}")
        table = compare_table(self.collection, tables, names, self.settings["aggregate"], test, alpha,
                              *fisher_settings(test, permutations, seed))
        return table if format is None else table.format(format)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:40] or "model"


def _model_name(model, name: str | None, identity: dict | None) -> str:
    """The user's name, else a slug of the object's class or function name and 8 hex digits of
    its identity (so two different models never share a run folder)."""
    if name is not None:
        if is_st(name):
            raise KitError(f"name={name!r}: st: names a sentence-transformers location; give the object another name")
        return check_run_name(name)
    base = getattr(model, "__name__", None) or type(model).__name__
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8] if identity else "anon"
    return f"{_slug(base)}-{digest}"


def register_model(model, name: str | None = None, *, revision: str | None = None, profile: str = "offline",
                   query_template: str = "{query}", doc_template: str = "{text}",
                   empty_instruction_template: str = "{query}", label: str | None = None,
                   role: str | None = None) -> str:
    """Make a Python model object rankable by name in this process (the study notebooks' MODELS,
    `evaluate`); returns the name. Its identity is the kit's fingerprint of everything it
    reaches, with `revision` beside it; `revision` alone where the fingerprint cannot be known
    (`evalkit.models.identity`)."""
    return _register(model, name, revision, profile, query_template, doc_template, empty_instruction_template,
                     label, role)[0]


def _register(model, name, revision, profile, query_template, doc_template, empty_instruction_template, label,
              role) -> tuple[str, str | None]:
    """(name, note): `register_model`, and why the kit could not fingerprint the model (or None)."""
    for argument, template in (("query_template", query_template), ("doc_template", doc_template),
                               ("empty_instruction_template", empty_instruction_template)):
        check_template(f"{argument}=", template, TEMPLATE_FIELDS[argument])
    prepare_object(model)
    identity, why = identity_and_reason(model, revision)
    name = _model_name(model, name, identity)
    if name in registry.model_names(profile):
        raise KitError(f"name={name!r} is a model of the registry (profile {profile}); give your model another name")
    templates = {"query_template": query_template, "doc_template": doc_template,
                 "empty_instruction_template": empty_instruction_template}
    if hasattr(model, "encode") and not hasattr(model, "score"):
        reads = "{instruction}" in query_template
    else:  # a kit Scorer says whether it reads the instruction; a score() callable is assumed to
        reads = bool(getattr(model, "reads_instruction", True))
    role = role or (ROLES_READING if reads else "agnostic")
    if role not in registry.ROLES:
        raise KitError(f"role={role!r}: choose one of {', '.join(registry.ROLES)}")
    as_scorer(model, name, identity, templates)  # refuses an object the kit cannot rank, before any work
    adhoc.register(name, model, identity, label or name, role, templates)
    return name, None if why is None else f"{name}: {why}"


def _queries(collection: Collection, seeds: Sequence[str] | None, queries: Sequence[str] | None):
    if seeds is not None and queries is not None:
        raise KitError("give seeds= or queries=, not both")
    for argument, given in (("seeds=", seeds), ("queries=", queries)):
        if given is not None and (isinstance(given, (str, bytes)) or not isinstance(given, Sequence | set)):
            raise KitError(f"{argument}{given!r:.60} is a {type(given).__name__}; give a list of ids, "
                           f"e.g. {argument}[\"929877\"]")
    if seeds is not None:
        return queries_of_seeds(tuple(str(s) for s in seeds), collection, "seeds=")
    if queries is not None:
        return check_query_ids(queries, collection, "queries=")
    return None


def _reference_tables(reference, settings_of, collection: Collection, variants: Sequence[str], runs_dir: Path,
                      names: list[str]) -> tuple[str, dict[str, pd.DataFrame]]:
    """(label, {variant: per-query table}) of the reference."""
    if isinstance(reference, Evaluation):
        missing = next((v for v in variants if v not in reference.runs), None)
        if missing is not None:
            raise KitError(f"reference= {reference.name} has no run of variant {missing}; evaluate it on that variant")
        return reference.name, {v: reference.per_query.loc[v] for v in variants}
    text = str(reference)
    settings = settings_of(BASE)
    known = text in registry.model_names(settings.profile) or adhoc.is_st(text) or adhoc.registered(text) is not None
    if known:
        tables = {}
        for variant in variants:
            chosen = settings_of(variant)
            run = ensure_run(replace(chosen, model=text), collection, runs_dir)
            tables[variant] = per_query(protocol_collection(collection, chosen.protocol), run, names)
        return text, tables
    path = Path(text).expanduser()
    if not path.exists():
        raise KitError(f"reference={text!r} is neither a model of profile {settings.profile} nor a run file or folder; "
                       "name a model (evalkit models) or give a run")
    run, protocol, judged = read_run(path, None, collection, default=settings.protocol)
    if protocol != settings.protocol:
        raise KitError(f"reference={text!r} was made under the {protocol} protocol, this evaluation under "
                       f"{settings.protocol}; give a run of one protocol")
    table = per_query(judged, run, names)
    return text, dict.fromkeys(variants, table)


def evaluate(model, dataset: str = "csfcube", *, name: str | None = None, revision: str | None = None,
             variants: str | Sequence[str] | None = None, protocol: str = "pool", profile: str = "offline",
             reference=None, instructions: str | Path | None = None, seeds: Sequence[str] | None = None,
             queries: Sequence[str] | None = None, query_template: str = "{query}", doc_template: str = "{text}",
             empty_instruction_template: str = "{query}", label: str | None = None, role: str | None = None,
             measures: Sequence[str] | None = None, discount: str | None = None, k: int | None = None,
             aggregate: str = "folds", runs_dir: str | Path = "runs", first_stage: str | None = None,
             depth: int | None = None, corpus: str | None = None) -> Evaluation:
    """Rank `dataset` with `model` under each variant, store the runs, and evaluate them (see the
    module docstring). `variants`: default ``base``, or every variant of `instructions` when an
    instruction file is given. `seeds` / `queries`: a smoke run over some queries only."""
    if aggregate not in AGGREGATIONS:
        raise KitError(f"aggregate={aggregate!r}: choose one of {', '.join(AGGREGATIONS)}")
    if protocol not in PROTOCOLS:
        raise KitError(f"protocol={protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    if profile not in registry.profiles():
        raise KitError(f"profile={profile!r}: choose one of {', '.join(registry.profiles())}")
    if discount is not None and discount not in DISCOUNTS:
        raise KitError(f"discount={discount!r}: choose {' or '.join(DISCOUNTS)}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise KitError(f"k={k!r}: give a positive integer cut-off")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise KitError(f"depth={depth!r}: give a positive integer")
    if instructions is not None and not Path(instructions).expanduser().is_file():
        raise KitError(f"instructions={str(instructions)!r}: no such file; give a YAML file shaped as "
                       "evalkit/config/instructions.yaml")
    if isinstance(model, str):
        if name is not None or revision is not None:
            raise KitError("name= and revision= apply to a model object; a model named by a string is a registry "
                           "entry or an st: spec (write st:LOCATION;revision=REV)")
        registry.spec(model, profile)  # a registry name or st: spec: one-line error when unknown
        model_name, unseen = model, None
    else:
        model_name, unseen = _register(model, name, revision, profile, query_template, doc_template,
                                       empty_instruction_template, label, role)
    collection = load_dataset(dataset)
    if instructions is not None:
        instructions = str(Path(instructions).expanduser())
        chosen_variants = collection.with_instructions(Path(instructions)).variants
    else:
        chosen_variants = (BASE,)
    variants = [variants] if isinstance(variants, str) else list(variants or chosen_variants)
    known = chosen_variants if instructions is not None else collection.variants
    unknown = next((v for v in variants if v not in known), None)
    if unknown is not None:
        raise KitError(f"variants= {unknown!r}: {collection.name} has the variants {', '.join(known)}"
                       + ("" if instructions is not None else " (give instructions= for your own)"))
    if measures is not None:
        if discount is not None or k is not None:
            raise KitError("discount= and k= shape only the default measures; with measures= name the measure itself")
        if isinstance(measures, str):
            raise KitError(f"measures={measures!r} is a string; give a list, e.g. measures=[\"nDCG@10\", \"AP\"]")
        names = list(measures)
        check_listed_once(names, "measures=")
    else:
        names = default_measures(collection, discount, k)
    check_measures(names, collection)
    subset = _queries(collection, seeds, queries)
    runs_dir = Path(runs_dir)

    def settings_of(variant: str) -> RunSettings:
        return RunSettings(model=model_name, dataset=dataset, profile=profile, protocol=protocol, variant=variant,
                           first_stage=first_stage, depth=depth, queries=subset, corpus=corpus,
                           instructions=instructions)

    judged = protocol_collection(collection, protocol)  # released: the seed judged too, as `evalkit evaluate`
    tables, folders = {}, {}
    for variant in variants:
        settings = settings_of(variant)
        run = ensure_run(settings, collection, runs_dir)
        folders[variant] = run_folder(runs_dir, settings, collection.name)
        tables[variant] = per_query(judged, run, computed_measures(names))
    used = "mean" if not collection.folds else aggregate
    twins = shown_once(names, tables.values())[1] if measures is None else {}
    rows = []
    for variant, table in tables.items():
        summary = summary_of(judged, table, names, aggregate, {})
        rows += [{"variant": variant, "measure": m, **summary[m]} for m in names]
    measures_table = pd.DataFrame(rows).set_index(["variant", "measure"])
    per_query_table = pd.concat(tables, names=["variant", "qid"])
    notes = sorted({n for t in tables.values() for n in fold_notes(judged, t, used)})
    tests, pairs = None, {}
    if reference is not None:
        label_of, references = _reference_tables(reference, settings_of, collection, variants, runs_dir,
                                                 computed_measures(names))
        if label_of == model_name:
            raise KitError(f"reference={label_of!r} is the model evaluated; name another model or run")
        compared = compared_measures(names)
        pairs = {v: {label_of: references[v], model_name: tables[v]} for v in variants}
        tests = pd.concat([compare(judged, pairs[v], compared, used).assign(variant=v) for v in variants],
                          ignore_index=True)
        tests = tests[["variant", *[c for c in tests.columns if c != "variant"]]]
        blank = tests[(tests["note"] != "") & (tests["note"] != "reference")]
        notes += [f"tests: {count} row(s) without a p-value: {why}" for why, count in
                  blank["note"].str.split(";").str[0].value_counts().sort_index().items()]
    settings = {"dataset": dataset, "profile": profile, "protocol": protocol, "variants": variants,
                "measures": names, "aggregate": used, "model_identity": registry.identity(registry.spec(model_name,
                                                                                                      profile))}
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
                      pairs, judged)
