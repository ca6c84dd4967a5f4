"""The study API: each step a study notebook shows, as one function returning a plain pandas
object a researcher can look at and change.

A notebook calls them in this order, each in a cell of its own::

    study = params.check("relevance", PROFILE=..., ...)       # the checked parameters
    collection, data = steps.load_collection(study)            # CSFCube, its annotators
    runs = steps.load_runs(study, collection)                  # each model's run, made or reused, once
    values = steps.per_query(runs, [study.measure])            # one row per (model, query), fractions
    values = pd.concat([values, steps.human(study, collection, data, [study.measure])])
    aggregated = steps.aggregate(values, collection)           # per facet and fold aggregate, x100
    tests = steps.paired_tests(values, collection, [study.measure], study.reference, family="reference")
    intervals = steps.intervals(values, study.measure)         # bootstrap 95%, x100
    table = steps.relevance_table(study, runs, aggregated, intervals, tests, steps.published("relevance"))

The paired tests and their Holm adjustment are `evalkit.evaluation.compare.compare`, the function
`evalkit evaluate`, `evalkit.api.evaluate` and the explore page use; the family Holm adjusts over
is its named argument (``pairs``: every pair of runs; ``reference``: each run against the
reference, as the paper marks Table 1). The aggregate is `evalkit.evaluation.evaluate.summarize`
(CSFCube: the mean of the two test-fold means; p-MRR: the mean of the facet means). Values in
`per_query` are fractions, as every measure computes them; tables and figures are x100, as the
paper prints them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scistats

from evalkit.data.collection import Collection
from evalkit.data.runs import Run
from evalkit.datasets import csfcube
from evalkit.datasets.csfcube import CSFCube, annotators
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.compare import COLUMNS as COMPARED
from evalkit.evaluation.compare import compare
from evalkit.evaluation.evaluate import per_query as per_query_table
from evalkit.evaluation.evaluate import summarize
from evalkit.evaluation.stats import ALPHA, interval_or_nan
from evalkit.models import registry
from evalkit.study import printed
from evalkit.study import rows as study_rows
from evalkit.study.human import POOL_LABEL, human_per_query, protocol_label
from evalkit.study.params import BOOTSTRAP_SEED, Study
from evalkit.study.published import COLUMNS, published_rows

HUMAN = "human"
HUMAN_LABEL = POOL_LABEL
KEYS = ["model", "label"]  # a row of the study: a model (Human's recipes: one label each)


@dataclass(frozen=True)
class StudyRuns:
    """The study models' runs of one instruction variant, loaded and verified once.

    `runs`: model -> run, for the models that ran; `status`: one row per study model (model,
    label, role, variant, status: "ran" or "not run: <reason>"), in the study's order. Shown in a
    notebook as its status table."""

    study: Study
    collection: Collection
    variant: str
    runs: dict[str, Run]
    status: pd.DataFrame

    @property
    def reasons(self) -> dict[str, str]:
        """model -> "not run: <reason>" of the models that did not run."""
        failed = self.status[self.status[study_rows.STATUS] != study_rows.RAN]
        return dict(zip(failed.model, failed[study_rows.STATUS]))

    def _repr_html_(self) -> str:
        return printed.show(self.status, split=False)._repr_html_()

    def __repr__(self) -> str:
        return self.status.to_string(index=False)


def labelled(study: Study, model: str) -> dict[str, str]:
    """A study model's row keys: its name, label and role (`config/models.yaml`), source "kit"."""
    spec = registry.spec(model, study.profile)
    return {"model": model, "label": spec.label, "role": spec.role, "source": "kit"}


def load_collection(study: Study) -> tuple[Collection, CSFCube]:
    """CSFCube as the study evaluates it (`evalkit.datasets.csfcube`), and its release data (the
    annotators' grades the Human rows rank by)."""
    data = csfcube.load()
    return csfcube.to_collection(data), data


def load_runs(study: Study, collection: Collection, variant: str = "base",
              models: Sequence[str] | None = None, prompt: str | None = None) -> StudyRuns:
    """Each study model's run of `variant` (`evalkit.pipeline.runner`: a verified stored run reused,
    else made and stored); a model that cannot run is a "not run: <reason>" status row
    (`evalkit.study.rows`; ``STRICT=1`` stops instead). `models`: a subset of the study's; `prompt`:
    appended to every query (a run of its own)."""
    chosen = study if models is None else study.with_models(list(models))
    made, reasons = study_rows.outcomes(chosen, collection, variant, prompt)
    status = pd.DataFrame([{**labelled(study, m), "variant": variant,
                            study_rows.STATUS: reasons.get(m, study_rows.RAN)} for m in chosen.models],
                          columns=["model", "label", "role", "source", "variant", study_rows.STATUS])
    return StudyRuns(chosen, collection, variant, made, status.drop(columns="source"))


def load_variant_runs(study: Study, collection: Collection, variants: Sequence[str]) -> dict[str, StudyRuns]:
    """`load_runs` of each variant, in order; a model that did not run under one variant is not
    tried under the later ones (its status says why)."""
    return _load_each(study, collection, {v: (v, None) for v in variants})


def load_prompt_runs(study: Study, collection: Collection, prompts: Sequence[str]) -> dict[str | None, StudyRuns]:
    """`load_runs` without a prompt (key None), then with each of `prompts` appended to every query,
    as `load_variant_runs` does for variants."""
    return _load_each(study, collection, {p: ("base", p) for p in [None, *prompts]})


def _load_each(study: Study, collection: Collection, keyed: dict) -> dict:
    out, failed = {}, {}
    for key, (variant, prompt) in keyed.items():
        out[key] = load_runs(study, collection, variant, [m for m in study.models if m not in failed], prompt)
        failed |= out[key].reasons
    return out


def _long(frame: pd.DataFrame, collection: Collection, keys: dict) -> pd.DataFrame:
    """A per-query table (`evalkit.evaluation.evaluate.per_query`: index qid) as rows of the long form."""
    out = frame.reset_index().rename(columns={"index": "qid", "stratum": "facet"})
    seeds = [q.seed.doc_id if (q := collection.queries.get(qid)) is not None and q.seed else qid for qid in out.qid]
    out.insert(0, "seed", seeds)
    for i, (name, value) in enumerate(keys.items()):
        out.insert(i, name, value)
    return out[[*keys, "qid", "seed", *[c for c in out.columns if c not in (*keys, "qid", "seed")]]]


def per_query(runs: StudyRuns, measures: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (model, query) of the models that ran: model, label, variant, qid, seed, facet,
    fold, then each measure (fractions; p-MRR on every paired collection). Any registered measure
    name (`evalkit.evaluation.measures`: ``MAP``, ``nDCG@10``, ``nDCG_csfcube@20``, ...)."""
    frames = [_long(per_query_table(runs.collection, run, list(measures)), runs.collection,
                    {**{k: v for k, v in labelled(runs.study, m).items() if k in KEYS}, "variant": runs.variant})
              for m, run in runs.runs.items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "variant", "qid"])


def human_recipes(study: Study) -> dict[str, str]:
    """The Human rows a table shows, recipe -> label: the pool recipe, and on the pooled and full
    protocols also the protocol-aware one (on pool the two are the same ranking)."""
    recipes = {"pool": HUMAN_LABEL}
    if study.protocol != "pool":
        recipes["protocol"] = protocol_label(study.protocol)
    return recipes


def human_table(study: Study, data: CSFCube, collection: Collection, measures: Sequence[str],
                recipe: str = "pool") -> pd.DataFrame:
    """Per-query values of the Human reference (`evalkit.study.human`, `recipe` pool or protocol:
    the study's protocol list), restricted to the study's queries in `collection` (index qid; a
    collection narrowed to some queries, e.g. one facet, keeps the study's seeds among them)."""
    wanted = None if study.seeds is None else {q for s in study.seeds for q in collection.by_seed.get(s, ())}
    chosen = None if wanted is None else tuple(q for q in collection.queries if q in wanted)
    aware = recipe == "protocol"
    table = human_per_query(annotators(data), list(measures), collection, recipe=recipe,
                            protocol=study.protocol if aware else "pool", profile=study.profile,
                            corpus=study.corpus, queries=chosen if aware else None)
    return table if chosen is None else table.loc[table.index.isin(chosen)]


def human(study: Study, collection: Collection, data: CSFCube, measures: Sequence[str] = (),
          variant: str = "base") -> pd.DataFrame:
    """The Human reference's per-query values, in `per_query`'s form (model ``human``, one label
    per recipe, `human_recipes`), on the study's queries that are in `collection`."""
    frames = []
    for recipe, label in human_recipes(study).items():
        table = human_table(study, data, collection, measures, recipe)
        frames.append(_long(table, collection, {"model": HUMAN, "label": label, "variant": variant,
                                                "recipe": recipe}))
    return pd.concat(frames, ignore_index=True)


def tables_of(values: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """label -> that row's per-query table (`evalkit.evaluation.evaluate.per_query`'s form: index qid,
    stratum, fold, measures), in the order the rows first appear."""
    out = {}
    for label, group in values.groupby("label", sort=False):
        table = group.set_index("qid").rename(columns={"facet": "stratum"})
        out[label] = table.drop(columns=[c for c in ("model", "label", "variant", "recipe", "seed") if c in table])
    return out


def measures_of(values: pd.DataFrame) -> list[str]:
    """The measure columns of a `per_query` frame."""
    return [c for c in values.columns if c not in (*KEYS, "variant", "recipe", "qid", "seed", "facet", "fold")]


def aggregate(values: pd.DataFrame, collection: Collection, aggregate_by: str = "folds") -> pd.DataFrame:
    """One row per (model, label, measure): background, method, result and all, x100, each measure
    aggregated as its declaration says (`evalkit.evaluation.evaluate.summarize`: ranking measures the
    mean of the two test-fold means on CSFCube, ``aggregate_by="mean"`` the plain mean; p-MRR the
    mean of the facet means)."""
    rows = []
    models = values.drop_duplicates("label").set_index("label")["model"]
    measures = measures_of(values)
    for label, table in tables_of(values).items():
        summary = summarize(collection, table, aggregate_by)
        for measure in measures:
            parts = summary.get(measure, {})
            rows.append({"model": models[label], "label": label, "measure": measure,
                         **{c: 100 * parts.get(c, math.nan) for c in COLUMNS}})
    return pd.DataFrame(rows, columns=[*KEYS, "measure", *COLUMNS])


def interval(values: pd.Series) -> tuple[float, float]:
    """The bootstrap 95% interval (percentile, 10,000 resamples, seed `BOOTSTRAP_SEED`) of the mean of
    per-query `values` (fractions), x100; NaN where fewer than two values are given."""
    low, high = interval_or_nan(values, seed=BOOTSTRAP_SEED)
    return 100 * low, 100 * high


def intervals(values: pd.DataFrame, measure: str) -> pd.DataFrame:
    """`interval` of the per-query mean of `measure` per (model, label) and facet, and over all
    queries (``all``), x100."""
    rows = []
    for (model, label), group in values.groupby(KEYS, sort=False):
        for facet in COLUMNS:
            chosen = group[measure] if facet == ALL else group.loc[group.facet == facet, measure]
            low, high = interval(chosen)
            rows.append({"model": model, "label": label, "facet": facet, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=[*KEYS, "facet", "ci_low", "ci_high"])


def paired_tests(values: pd.DataFrame, collection: Collection, measures: Sequence[str], reference: str,
                 family: str = "reference", test: str = "t", adjust: str = "holm",
                 aggregate_by: str = "folds") -> pd.DataFrame:
    """Paired two-sided tests of the study's models (Human aside) on per-query values, per measure
    and facet and over all queries, Holm-adjusted over `family` (``reference``: each model against
    `reference`, the paper's Table 1 marks; ``pairs``: every pair): `evalkit.evaluation.compare.compare`,
    the one computation of `evalkit evaluate` and the API. Runs are named by model."""
    kit = values[values.model != HUMAN]
    tables = tables_of(kit)
    names = dict(zip(kit.label, kit.model))
    if reference not in names.values():  # the reference did not run: nothing to test against
        return pd.DataFrame(columns=COMPARED)
    ordered = sorted(tables, key=lambda label: names[label] != reference)  # the reference first
    return compare(collection, {names[label]: tables[label] for label in ordered}, list(measures), aggregate_by,
                   test=test, adjust=adjust, family=family)


def test_p(tests: pd.DataFrame, model: str, measure: str, stratum: str = ALL, column: str = "p") -> float:
    """A model's `column` (``p`` or ``p_holm``) of the test against the reference in `tests`."""
    row = tests[(tests.run == model) & (tests.measure == measure) & (tests.stratum == stratum)
                & (tests.against != "")]
    return float(row[column].iloc[0]) if len(row) else math.nan


def not_significant(tests: pd.DataFrame, model: str, measure: str, alpha: float = ALPHA) -> str:
    """The columns (facets, then ``all``) where the test of `model` against the reference finds no
    significant difference (raw p >= alpha; NaN never marked), ";"-separated: Table 1's marks."""
    return ";".join(c for c in COLUMNS if test_p(tests, model, measure, c) >= alpha)


def published(kind: str) -> pd.DataFrame:
    """The paper's published rows of "relevance" (Table 1, NDCG@20, with its marks) or "p-MRR"
    (Table 2), x100 as printed (`evalkit/config/published_mysore.csv`, each row's source)."""
    return pd.DataFrame(published_rows(kind))


def kendall_taus(run: Run, collection: Collection) -> list[float]:
    """Kendall tau-b between the scores a run gives a seed's two instructions, per paired query
    the run holds (each pair once), over the documents both score; NaN where it is undefined
    (one side's scores constant, or fewer than two documents): a constant side is not an
    unchanged ranking, so it is never read as 1."""
    taus = []
    for a, b in collection.pairs.items():
        if a > b or a not in run or b not in run:
            continue
        common = sorted(set(run[a]) & set(run[b]))
        taus.append(float(scistats.kendalltau([run[a][d] for d in common], [run[b][d] for d in common]).statistic))
    return taus


def ranking_movement(run: Run, collection: Collection) -> tuple[float, int]:
    """The mean of `kendall_taus` over the seed pairs where it is defined (1 = the two instructions
    rank alike), and the number of pairs where it is not (counted apart)."""
    taus = kendall_taus(run, collection)
    defined = [t for t in taus if not math.isnan(t)]
    return (float(np.mean(defined)) if defined else math.nan), len(taus) - len(defined)


def movement(runs: StudyRuns) -> pd.DataFrame:
    """Per model that ran, `ranking_movement`: ``kendall_tau`` and ``kendall_undefined``."""
    rows = [(model, *ranking_movement(run, runs.collection)) for model, run in runs.runs.items()]
    return pd.DataFrame(rows, columns=["model", "kendall_tau", "kendall_undefined"])
