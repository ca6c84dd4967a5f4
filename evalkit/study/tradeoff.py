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
    """NDCG@20 against p-MRR: kit models and variants, Human, the paper's points, the hybrid curve.
    Markers by kind, colours by model (`figures.colour_of`, as in every figure); labels placed
    without overlaps (`figures.place_labels`: points at one place share a label, e.g. a = 1.0 of
    the hybrid and its plain model, or the paper's models with equal values)."""
    from evalkit.study.figures import colour_of, place_labels

    fig, ax = plt.subplots(figsize=(10, 6.5))
    xs, ys, texts, colours = [], [], [], []
    for label, curve in table[table.kind == "hybrid"].groupby("label", sort=False):
        colour = colour_of(label.removesuffix(" hybrid"))
        ax.plot(curve[X], curve[Y], "-o", markersize=3, color=colour, alpha=0.6, label=f"{label}, a = 0..1")
        for _, r in curve.iloc[[0, -1]].iterrows():
            xs.append(r[X]), ys.append(r[Y]), texts.append(r.variant), colours.append("dimgrey")
    styles = {"kit": ("o", "kit models x variants"), "human": ("*", "Human"),
              "paper": ("s", "paper (full corpus)"), "hybrid-cv": ("D", "hybrid, a chosen on dev")}
    for kind, (marker, legend) in styles.items():
        rows = table[table.kind == kind]
        if rows.empty:
            continue
        names = [r.label.removesuffix(" hybrid") if kind == "hybrid-cv" else
                 f"{r.label} (paper)" if kind == "paper" and not r.label.endswith(" (paper)") else r.label
                 for r in rows.itertuples()]
        ax.scatter(rows[X], rows[Y], marker=marker, c=[colour_of(n) for n in names],
                   s=120 if kind == "human" else 40, edgecolors="black" if kind in ("paper", "hybrid-cv") else "none",
                   linewidths=0.5, label=legend, zorder=3)
        for r in rows.itertuples():
            variant = kind == "kit" and r.variant != "Base"  # variants: the variant name only, in grey
            xs.append(rows.loc[r.Index, X]), ys.append(rows.loc[r.Index, Y])
            texts.append(r.variant if variant else r.label[:40])
            colours.append("grey" if variant else "black")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xlabel(f"{X} (x100)")
    ax.set_ylabel(f"{Y} (x100)")
    ax.margins(0.08)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    place_labels(ax, xs, ys, texts, fontsize=6, colours=colours)
    return fig
