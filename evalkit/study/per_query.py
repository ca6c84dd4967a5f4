"""Per-query views of the study: each model's value of a measure on every query, ordered by the
reference model, so a reader sees where models win and lose and the queries where every model
fails.

`values` gives one row per model and query (x100, from the study's stored runs and the Human
reference); `plot` draws one panel per measure; `failures` lists the queries where every kit
model is at or below a threshold (by default: NDCG <= 20, p-MRR <= 0).
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from evalkit.collection import Collection  # noqa: E402
from evalkit.evaluation import PMRR, per_query  # noqa: E402
from evalkit.study.figures import colour_of  # noqa: E402

HUMAN = "human"
FAIL_AT = {PMRR: 0.0}  # p-MRR: no move in the asked direction
FAIL_AT_RELEVANCE = 20.0  # ranking measures (x100)


def values(study, collection: Collection, data=None, measure: str | None = None) -> pd.DataFrame:
    """One row per (model, query): model, label, qid, seed, facet, `measure` and p-MRR (x100), for the
    study's models (their base runs, made or reused) and, with `data`, the Human reference."""
    from evalkit.study import tables

    measure = measure or study.measure
    frames = {m: per_query(collection, run, [measure]) for m, run in tables.runs(study, collection).items()}
    labels = {m: tables._label(study.profile, m)["label"] for m in frames}
    if data is not None:
        frames[HUMAN] = tables.human_table(study, data, collection, [measure])
        labels[HUMAN] = tables.HUMAN_LABEL
    rows = []
    for model, frame in frames.items():
        for qid, row in frame.iterrows():
            query = collection.queries[qid]
            rows.append({"model": model, "label": labels[model], "qid": qid,
                         "seed": query.seed.doc_id if query.seed else qid, "facet": row["stratum"],
                         measure: 100 * row[measure], PMRR: 100 * row[PMRR] if PMRR in frame else math.nan})
    return pd.DataFrame(rows)


def reference_of(study) -> str:
    """The study's reference model: its own, else the profile's when run, else its first model."""
    if getattr(study, "reference", None):
        return study.reference
    from evalkit.models import registry

    reference = registry.profile_settings(study.profile).get("study", {}).get("reference")
    return reference if reference in study.models else study.models[0]


def order(table: pd.DataFrame, metric: str, reference: str) -> list[str]:
    """Query ids by the reference model's value, best first (ties: query id); queries it has no value for
    are dropped."""
    ref = table[(table.model == reference)].dropna(subset=[metric])
    return [q for _, q in sorted(zip(-ref[metric].to_numpy(), ref.qid))]


def failures(table: pd.DataFrame, metric: str, at: float | None = None) -> list[str]:
    """Queries where every kit model (Human aside) has `metric` <= `at` (default `FAIL_AT`)."""
    at = FAIL_AT.get(metric, FAIL_AT_RELEVANCE) if at is None else at
    models = table[table.model != HUMAN].dropna(subset=[metric])
    worst = models.groupby("qid")[metric].max()
    return sorted(worst[worst <= at].index)


def plot(table: pd.DataFrame, metrics, reference: str, at: dict | None = None) -> plt.Figure:
    """One panel per metric: every model's per-query value (x100) over the queries ordered by the
    reference model (its line bold); Human dotted; grey bands mark the queries where every model fails."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    reference = reference if reference in set(table.model) else table.model.iloc[0]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(12, 3.6 * len(metrics)), squeeze=False)
    for ax, metric in zip(axes[:, 0], metrics):
        qids = order(table, metric, reference)
        position = {q: i for i, q in enumerate(qids)}
        threshold = (at or {}).get(metric)
        for qid in failures(table[table.qid.isin(qids)], metric, threshold):
            ax.axvspan(position[qid] - 0.5, position[qid] + 0.5, color="#dddddd", zorder=0, linewidth=0)
        for model, group in table.groupby("model", sort=False):
            group = group[group.qid.isin(position)].dropna(subset=[metric])
            group = group.assign(x=group.qid.map(position)).sort_values("x")
            label = group.label.iloc[0] if len(group) else model
            style = {"linewidth": 2.2, "zorder": 4} if model == reference else \
                {"linestyle": ":", "linewidth": 1.2, "zorder": 3} if model == HUMAN else {"linewidth": 0.8, "zorder": 3}
            ax.plot(group.x, group[metric], marker="o", markersize=3, color=colour_of(label),
                    label=f"{label} (reference)" if model == reference else label, **style)
        ax.set_xticks(np.arange(len(qids)), qids, rotation=90, fontsize=5)
        ax.set_xlim(-0.7, len(qids) - 0.3)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_ylabel(f"{metric} (x100)")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1, 0].set_xlabel("query (seed_facet), ordered by the reference model; grey: every model fails")
    fig.tight_layout()
    return fig
