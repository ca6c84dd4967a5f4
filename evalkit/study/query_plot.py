"""The per-query figure of the study: each model's value of a measure on every query, ordered by
the reference model, so a reader sees where models win and lose and the queries where every model
fails.

It reads `evalkit.study.steps.per_query` rows (one per model and query, fractions; the Human
rows of `steps.human` beside them) and shows them x100, as the tables: `plot` draws one panel per
measure, queries down the side (horizontal labels) in the order `order` gives and `order_rule`
states; `failures` lists the queries where every kit model is at or below a threshold (by default:
NDCG <= 20, p-MRR <= 0); `caption` says all of it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from evalkit.evaluation.evaluate import PMRR
from evalkit.models import registry
from evalkit.study import figures
from evalkit.study.figures import MIN_FONT, colour_of

HUMAN = "human"  # the Human rows' model (`evalkit.study.steps.HUMAN`)
FAIL_AT = {PMRR: 0.0}  # p-MRR: no move in the asked direction
FAIL_AT_RELEVANCE = 20.0  # ranking measures (x100)


def reference_of(study) -> str:
    """The study's reference model: its own, else the profile's when run, else its first model."""
    if getattr(study, "reference", None):
        return study.reference

    reference = registry.profile_settings(study.profile).get("study", {}).get("reference")
    return reference if reference in study.models else study.models[0]


def x100(table: pd.DataFrame, metrics) -> pd.DataFrame:
    """`table` with the `metrics` columns x100, as the tables and figures print them."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    return table.assign(**{m: 100 * table[m] for m in metrics})


def _kit_mean(table: pd.DataFrame, metric: str) -> pd.Series:
    return table[table.model != HUMAN].dropna(subset=[metric]).groupby("qid")[metric].mean()


def _constant(table: pd.DataFrame, metric: str, reference: str) -> bool:
    values = table.loc[table.model == reference, metric].dropna()
    return len(values) > 0 and values.nunique() == 1


def order(table: pd.DataFrame, metric: str, reference: str) -> list[str]:
    """Query ids, best first: by the reference model's value, ties by the mean of the kit's models (Human
    aside), then by query id; when the reference gives every query the same value (e.g. p-MRR 0 for an
    instruction-agnostic model), by the kit models' mean, then query id. Queries the reference has no
    value for are dropped."""
    ref = table[table.model == reference].dropna(subset=[metric]).set_index("qid")[metric]
    mean = _kit_mean(table, metric).reindex(ref.index)
    first = 0.0 * ref if _constant(table, metric, reference) else ref
    return [q for _, _, q in sorted(zip(-first.to_numpy(), -mean.to_numpy(), ref.index))]


def order_rule(table: pd.DataFrame, metric: str, reference: str) -> str:
    """The order `order` uses, in words, as true for this table."""
    if _constant(table, metric, reference):
        value = table.loc[table.model == reference, metric].dropna().iloc[0]
        return (f"ordered by the mean {metric} of the kit's models, best first (the reference {reference} gives "
                f"every query {value:.2f}), ties by query id")
    return (f"ordered by the reference {reference}'s {metric}, best first, ties by the mean of the kit's models, "
            "then by query id")


def failures(table: pd.DataFrame, metric: str, at: float | None = None) -> list[str]:
    """Queries where every kit model (Human aside) has `metric` <= `at` (default `FAIL_AT`)."""
    at = FAIL_AT.get(metric, FAIL_AT_RELEVANCE) if at is None else at
    models = table[table.model != HUMAN].dropna(subset=[metric])
    worst = models.groupby("qid")[metric].max()
    return sorted(worst[worst <= at].index)


def plot(table: pd.DataFrame, metrics, reference: str, at: dict | None = None) -> plt.Figure:
    """One panel per metric, side by side: the queries down the side in `order` (best at the top,
    horizontal labels of `MIN_FONT` pt), every model's per-query value (x100) across: the reference
    large diamonds (queries are categories: no line joins them), the other kit models dots, Human
    open circles; grey bands mark the queries
    where every kit model fails (`failures`). One legend under the panels, its markers as drawn."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    table = x100(table, metrics)
    reference = reference if reference in set(table.model) else table.model.iloc[0]
    counts = [table.loc[table.model == reference, m].notna().sum() for m in metrics]
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(9.0, 6.2 * len(metrics)), 1.6 + 0.17 * max(counts)),
                             squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        qids = order(table, metric, reference)
        position = {q: i for i, q in enumerate(qids)}
        threshold = (at or {}).get(metric)
        for qid in failures(table[table.qid.isin(qids)], metric, threshold):
            ax.axhspan(position[qid] - 0.5, position[qid] + 0.5, color="#e3e3e3", zorder=0, linewidth=0)
        for model, group in table.groupby("model", sort=False):
            group = group[group.qid.isin(position)].dropna(subset=[metric])
            group = group.assign(y=group.qid.map(position)).sort_values("y")
            label = group.label.iloc[0] if len(group) else model
            colour = colour_of(label)
            if model == reference:
                ax.plot(group[metric], group.y, "D", color=colour, markersize=5, zorder=4,
                        label=f"{label} (reference)")
            elif model == HUMAN:
                ax.plot(group[metric], group.y, "o", markerfacecolor="none", markeredgecolor=colour, markersize=5,
                        zorder=3, label=label)
            else:
                ax.plot(group[metric], group.y, "o", color=colour, markersize=3.5, alpha=0.85, zorder=3, label=label)
        ax.set_yticks(np.arange(len(qids)), qids, fontsize=MIN_FONT)
        ax.set_ylim(len(qids) - 0.5, -0.5)
        ax.tick_params(axis="x", labelsize=MIN_FONT + 1)
        ax.axvline(0, color="black", linewidth=0.6)
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel(f"{metric} (x100)", fontsize=10)
        ax.set_title(f"{metric}, best first: by the kit models' mean ({reference} is constant)"
                     if _constant(table, metric, reference) else f"{metric}, best first: by {reference}",
                     fontsize=MIN_FONT + 1, loc="left")
    fig.tight_layout()
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(names), 1 + len(metrics)),
               fontsize=MIN_FONT + 1, frameon=False)  # under the panels; the saved figure's tight box holds it
    return fig


def caption(study, table: pd.DataFrame, metrics, reference: str) -> str:
    """The per-query figure's caption: what each panel shows, its order as `order_rule` states it, the
    failure bands and the failing queries."""
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    table = x100(table, metrics)
    panels = "; ".join(f"{metric}: {order_rule(table, metric, reference)}" for metric in metrics)
    bands = ", ".join(f"{m} <= {FAIL_AT.get(m, FAIL_AT_RELEVANCE):.0f}" for m in metrics)
    failing = "; ".join(f"{m}: {', '.join(failures(table, m)) or 'none'}" for m in metrics)
    return figures.caption(study, f"Per-query values (x100) of every model, one row per query (seed_facet), "
                                 f"one panel per measure ({panels}). The reference {reference} is drawn as diamonds "
                                 "(no line joins the queries); "
                                 f"Human open circles; grey bands: queries where every kit model is at or "
                                 f"below the failure threshold ({bands}). Failing queries: {failing}.")
