"""Relevance against instruction following, from the built tables: every model at Base and
under every sensitivity variant, Human, the paper's published points and the facet
hybrid's curve over a (with its cross-validated point). Values x100."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from evalkit.evaluation import PMRR  # noqa: E402
from evalkit.study.hybrid_study import CV_SETTING, measure_of  # noqa: E402

X, Y = "NDCG@20", "p-MRR"


def points(relevance: pd.DataFrame, following: pd.DataFrame, sensitivity: pd.DataFrame,
           hybrid: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per point: label, variant, NDCG@20, p-MRR, kind (kit, human, paper, hybrid, hybrid-cv)."""
    pmrr = dict(zip(following.label, following["all"]))
    rows = [{"label": r["label"], "variant": "Base", X: r["all"], Y: pmrr.get(r["label"], math.nan),
             "kind": "paper" if r["source"] != "kit" else ("human" if r["model"] == "human" else "kit")}
            for r in relevance.to_dict("records")]
    measure = measure_of(sensitivity)
    rows += [{"label": r["label"], "variant": r["variant"], X: r[measure], Y: r[PMRR], "kind": "kit"}
             for r in sensitivity.to_dict("records") if r["variant"] != "Base"]
    if hybrid is not None:
        measure = measure_of(hybrid)
        rows += [{"label": f"{r['label']} hybrid", "variant": r["setting"], X: r[measure], Y: r[PMRR],
                  "kind": "hybrid-cv" if r["setting"] == CV_SETTING else "hybrid"}
                 for r in hybrid.to_dict("records")]
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame) -> plt.Figure:
    """NDCG@20 against p-MRR: kit models and variants, Human, the paper's points, the hybrid curve."""
    fig, ax = plt.subplots(figsize=(10, 6.5))
    for label, curve in table[table.kind == "hybrid"].groupby("label", sort=False):
        ax.plot(curve[X], curve[Y], "-o", markersize=3, label=f"{label}, a = 0..1")
        for _, r in curve.iloc[[0, -1]].iterrows():
            ax.annotate(r.variant, (r[X], r[Y]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    styles = {"kit": ("o", "tab:blue", "kit models x variants"), "human": ("*", "black", "Human"),
              "paper": ("s", "tab:gray", "paper (full corpus)"),
              "hybrid-cv": ("D", "tab:red", "hybrid, a chosen on dev")}
    for kind, (marker, color, legend) in styles.items():
        rows = table[table.kind == kind]
        ax.scatter(rows[X], rows[Y], marker=marker, color=color, s=120 if kind == "human" else 40, label=legend)
        for _, r in rows.iterrows():
            variant = kind == "kit" and r.variant != "Base"  # variants: the variant name only, in grey
            ax.annotate(r.variant if variant else r.label[:40], (r[X], r[Y]), fontsize=6,
                        color="grey" if variant else "black", xytext=(3, -8), textcoords="offset points")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel(f"{X} (x100)")
    ax.set_ylabel(f"{Y} (x100)")
    ax.legend(fontsize=7, loc="best")
    return fig
