"""The study's three tables, each computed from runs of `evalkit.runner` (made on demand,
reused when a verified stored run matches): relevance (Table 1), instruction following
(Table 2) and instruction sensitivity (Table 3), with the paper's published rows.

Values are x100, as in the paper. Facet columns: background, method, result and all
(ranking measures: the official fold mean of the test halves; p-MRR: the mean of the
facet means).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scistats

from evalkit.collection import Collection
from evalkit.datasets.csfcube import CSFCube
from evalkit.errors import KitError
from evalkit.evaluation import PMRR, per_query, summarize
from evalkit.human import human_per_query
from evalkit.models import registry
from evalkit.runner import ensure_run
from evalkit.runs import Run
from evalkit.stats import bootstrap_ci, holm, paired_ttest
from evalkit.study.params import BOOTSTRAP_SEED, Study

PUBLISHED = Path(__file__).resolve().parents[1] / "config" / "published_mysore.csv"
PUBLISHED_METRICS = {"relevance": "ndcg@20", "p-MRR": "p-mrr"}  # metric names of the published file
COLUMNS = ["background", "method", "result", "all"]
ALPHA = 0.05
HUMAN_LABEL = "Human (annotators vs adjudication)"
SENSITIVITY_GROUPS = {
    "Base": ["base"],
    "Generic": ["generic"],
    "Definition": ["definition"],
    "Paraphrases (mean of 3)": ["paraphrase-1", "paraphrase-2", "paraphrase-3"],
    "Aspect subset": ["aspect-subset"],
}


def runs(study: Study, collection: Collection, variant: str = "base") -> dict[str, Run]:
    """The study models' runs of one instruction variant, by model name."""
    return {m: ensure_run(study.settings(m, collection, variant), collection, study.runs_dir) for m in study.models}


def human_table(study: Study, data: CSFCube, collection: Collection, measures: list[str]) -> pd.DataFrame:
    """Per-query values of the Human reference, restricted to the study's queries."""
    table = human_per_query(data, measures, collection)
    chosen = study.queries(collection)
    return table if chosen is None else table.loc[table.index.isin(chosen)]


def _label(profile: str, model: str) -> dict[str, str]:
    spec = registry.spec(model, profile)
    return {"model": model, "label": spec.label, "role": spec.role, "source": "kit"}


def _scaled(summary: dict[str, float]) -> dict[str, float]:
    return {c: 100 * summary[c] for c in COLUMNS}


def _interval(values: pd.Series) -> dict[str, float]:
    low, high = bootstrap_ci(values, seed=BOOTSTRAP_SEED)
    return {"ci_low": 100 * low, "ci_high": 100 * high}


def relevance_table(study: Study, collection: Collection, data: CSFCube) -> pd.DataFrame:
    """The relevance measure x100 per facet and aggregated, a bootstrap 95% interval of the
    per-query mean, and the paired t-test against the reference model over the aggregate's
    queries (raw p and Holm-adjusted over the models). `same_as_reference` is "reference"
    for the reference itself, "yes" when p >= 0.05 (no significant difference, the paper's
    mark), else "no". Then Human and the paper's published rows."""
    measure = study.measure
    tables = {m: per_query(collection, run, [measure]) for m, run in runs(study, collection).items()}
    reference = tables[study.reference][measure]
    pvalues = {m: paired_ttest(t[measure], reference).pvalue for m, t in tables.items() if m != study.reference}
    adjusted = holm(pvalues) if pvalues else {}
    rows = []
    for model, table in tables.items():
        p = pvalues.get(model, math.nan)
        rows.append({**_label(study.profile, model), "measure": measure,
                     **_scaled(summarize(collection, table)[measure]), **_interval(table[measure]),
                     "p_vs_reference": p, "p_holm": adjusted.get(model, math.nan),
                     "same_as_reference": "reference" if model == study.reference
                     else "yes" if p >= ALPHA else "no"})
    human = human_table(study, data, collection, [measure])
    rows.append({"model": "human", "label": HUMAN_LABEL, "role": "reference", "source": "kit", "measure": measure,
                 **_scaled(summarize(collection, human)[measure]), **_interval(human[measure])})
    return pd.DataFrame(rows + published_rows("relevance"))


def instruction_following_table(study: Study, collection: Collection, data: CSFCube) -> pd.DataFrame:
    """p-MRR x100 per facet and aggregated (mean of facet means), and how much a model's ranking
    moves between a seed's two instructions: mean Kendall tau over paired seeds (1 = unchanged)."""
    rows = []
    for model, run in runs(study, collection).items():
        table = per_query(collection, run, [])
        rows.append({**_label(study.profile, model), **_scaled(summarize(collection, table)[PMRR]),
                     "kendall_tau": ranking_movement(run, collection)})
    human = human_table(study, data, collection, [])
    rows.append({"model": "human", "label": HUMAN_LABEL, "role": "reference", "source": "kit",
                 **_scaled(summarize(collection, human)[PMRR]), "kendall_tau": math.nan})
    return pd.DataFrame(rows + published_rows(PMRR))


def ranking_movement(run: Run, collection: Collection) -> float:
    """Mean Kendall tau-b between the scores a run gives a seed's two instructions, over the
    paired queries the run holds (each pair once)."""
    taus = []
    for a, b in collection.pairs.items():
        if a > b or a not in run or b not in run:
            continue
        common = sorted(set(run[a]) & set(run[b]))
        tau = scistats.kendalltau([run[a][d] for d in common], [run[b][d] for d in common]).statistic
        taus.append(1.0 if math.isnan(tau) else tau)  # constant scores under both: nothing moved
    return float(np.mean(taus)) if taus else math.nan


def sensitivity_table(study: Study, collection: Collection) -> pd.DataFrame:
    """The relevance measure and p-MRR x100 (aggregated) per model and instruction-variant group
    (a group of several variants: the mean of their aggregates)."""
    measure = study.measure
    summaries: dict[str, dict[str, dict]] = {m: {} for m in study.models}
    for variant in [v for group in SENSITIVITY_GROUPS.values() for v in group]:
        for model, run in runs(study, collection, variant).items():
            summaries[model][variant] = summarize(collection, per_query(collection, run, [measure]))
    rows = []
    for model in study.models:
        for group, variants in SENSITIVITY_GROUPS.items():
            chosen = [summaries[model][v] for v in variants]
            rows.append({**_label(study.profile, model), "variant": group,
                         measure: 100 * float(np.mean([s[measure]["all"] for s in chosen])),
                         PMRR: 100 * float(np.mean([s[PMRR]["all"] for s in chosen]))})
    return pd.DataFrame(rows).drop(columns="source")


def published_rows(kind: str) -> list[dict]:
    """The paper's rows (x100, full-corpus protocol) of "relevance" (NDCG@20) or "p-MRR"."""
    if kind not in PUBLISHED_METRICS:
        raise KitError(f"no published rows of {kind!r}; choose one of {', '.join(PUBLISHED_METRICS)}")
    table = pd.read_csv(PUBLISHED)
    table = table[table.metric == PUBLISHED_METRICS[kind]]
    measure = {"measure": "NDCG@20 (paper)"} if kind == "relevance" else {}
    return [{"model": r.model, "label": f"{r.model} (paper)", "role": "published", "source": r.source, **measure,
             **{c: float(getattr(r, c)) for c in COLUMNS}} for r in table.itertuples()]
