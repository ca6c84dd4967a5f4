"""Relevance against instruction following, from the built tables: every model at Base and
under every sensitivity variant, Human, the facet hybrid's curve over a (with its
cross-validated point) in one panel, the paper's published points in another (a different
protocol and measure). Values x100."""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from evalkit.evaluation.evaluate import PMRR
from evalkit.study.figures import MIN_FONT, PAPER_PANEL, colour_of, place_labels
from evalkit.study.figures import caption as setting
from evalkit.study.hybrid_study import CV_SETTING, measure_of
from evalkit.study.tables import kit_variant

X, Y = "relevance", "p-MRR"
PAPER_MEASURE = "NDCG@20 (paper)"


def points(relevance: pd.DataFrame, following: pd.DataFrame, sensitivity: pd.DataFrame,
           hybrid: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per point: label, variant, kind (kit, human, paper, hybrid, hybrid-cv), measure (the
    relevance measure of the point: the kit's, or the paper's NDCG@20), relevance and p-MRR."""
    pmrr = dict(zip(following.label, following["all"]))
    measure = measure_of(sensitivity)
    rows = [{"label": r["label"], "variant": "Base",
             "kind": "paper" if r["source"] != "kit" else ("human" if r["model"] == "human" else "kit"),
             "measure": measure if r["source"] == "kit" else PAPER_MEASURE, X: r["all"],
             Y: pmrr.get(r["label"], math.nan)} for r in relevance.to_dict("records")]
    rows += [{"label": r["label"], "variant": r["variant"], "kind": "kit", "measure": measure, X: r[measure],
              Y: r[PMRR]} for r in sensitivity.to_dict("records") if kit_variant(r["variant"]) != "base"]
    if hybrid is not None:
        measure = measure_of(hybrid)
        rows += [{"label": f"{r['label']} hybrid", "variant": r["setting"],
                  "kind": "hybrid-cv" if r["setting"] == CV_SETTING else "hybrid", "measure": measure,
                  X: r[measure], Y: r[PMRR]} for r in hybrid.to_dict("records")]
    return pd.DataFrame(rows, columns=["label", "variant", "kind", "measure", X, Y])


def short(label: str) -> str:
    """A point's label: the model label without its parenthesis ("... (prompt-sensitivity probe)")."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", str(label)) or str(label)


def plot(table: pd.DataFrame) -> plt.Figure:
    """Relevance against p-MRR. Left, the kit: each model at Base (filled circle, its colour as in every
    figure, `figures.colour_of`) and under each instruction variant (open circle, same colour, the
    variant's name), Human (star), the facet hybrid's curve over a (line) and its cross-validated point
    (diamond). Right, the paper's published points (squares). Labels placed without overlapping each
    other, the points or the curve (`figures.place_labels`); the legends show the markers as drawn."""
    paper = table[table.kind == "paper"]
    kit = table[table.kind != "paper"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 7.5), gridspec_kw={"width_ratios": [1.6, 1]}, squeeze=False)
    ax, right = axes[0]
    xs, ys, texts, colours, lines, handles = [], [], [], [], [], []
    for label, curve in kit[kit.kind == "hybrid"].groupby("label", sort=False):
        colour = colour_of(label.removesuffix(" hybrid"))
        ax.plot(curve[X], curve[Y], "-", marker=".", markersize=4, color=colour, alpha=0.7, zorder=2)
        lines.append((list(curve[X]), list(curve[Y])))
        handles.append(Line2D([], [], color=colour, marker=".", alpha=0.7, label=f"{short(label)}, a = 0 to 1"))
        for _, r in curve.iloc[[0, -1]].iterrows():
            xs.append(r[X]), ys.append(r[Y]), texts.append(r.variant), colours.append("dimgrey")
    for label, rows in kit[kit.kind == "kit"].groupby("label", sort=False):
        colour = colour_of(label)
        base, variants = rows[rows.variant == "Base"], rows[rows.variant != "Base"]
        ax.scatter(base[X], base[Y], s=46, color=colour, zorder=4)
        ax.scatter(variants[X], variants[Y], s=40, facecolors="white", edgecolors=colour, linewidths=1.3, zorder=4)
        handles.append(Line2D([], [], color=colour, marker="o", linestyle="none", label=label))
        for r in base.to_dict("records"):
            xs.append(r[X]), ys.append(r[Y]), texts.append(short(label)), colours.append("black")
        for r in variants.to_dict("records"):
            xs.append(r[X]), ys.append(r[Y]), texts.append(r["variant"]), colours.append(colour)
    for r in kit[kit.kind == "human"].to_dict("records"):
        ax.scatter([r[X]], [r[Y]], marker="*", s=150, color=colour_of("human"), zorder=4)
        xs.append(r[X]), ys.append(r[Y]), texts.append(short(r["label"])), colours.append("black")
    if (kit.kind == "human").any():
        handles.append(Line2D([], [], color=colour_of("human"), marker="*", markersize=11, linestyle="none",
                              label="Human"))
    for r in kit[kit.kind == "hybrid-cv"].to_dict("records"):
        colour = colour_of(r["label"].removesuffix(" hybrid"))
        ax.scatter([r[X]], [r[Y]], marker="D", s=48, color=colour, edgecolors="black", linewidths=0.6,
                   zorder=5)
        handles.append(Line2D([], [], color=colour, marker="D", markeredgecolor="black", linestyle="none",
                              label=f"{short(r['label'])}, a chosen on dev"))
        xs.append(r[X]), ys.append(r[Y]), texts.append("a chosen on dev"), colours.append("black")
    if (kit.kind == "kit").any():
        handles.append(Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle="none",
                              label="open circle, in the model's colour: an instruction variant (named)"))
    measures = sorted(set(kit.measure))
    ax.set_xlabel(f"{' / '.join(measures)} (x100), this kit", fontsize=10)
    ax.set_title("This kit: models, instruction variants, Human, facet hybrid", fontsize=10, loc="left")
    for r in paper.to_dict("records"):
        label = r["label"] if r["label"].endswith(" (paper)") else f"{r['label']} (paper)"
        right.scatter([r[X]], [r[Y]], marker="s", s=40, color=colour_of(label), edgecolors="black",
                      linewidths=0.5, zorder=4)
    right.set_xlabel(f"{PAPER_MEASURE.replace(' (paper)', '')} (x100), as published", fontsize=10)
    right.set_title(f"Published: {PAPER_PANEL}", fontsize=10, loc="left")
    for panel in (ax, right):
        panel.axhline(0, color="black", linewidth=0.6)
        panel.set_ylabel(f"{Y} (x100)", fontsize=10)
        panel.tick_params(labelsize=MIN_FONT + 1)
        panel.grid(color="#eeeeee", linewidth=0.6)
        panel.set_axisbelow(True)
        panel.margins(0.12)
    ax.legend(handles=handles, fontsize=MIN_FONT, loc="upper left", bbox_to_anchor=(0.0, -0.13), frameon=False)
    # the paper's points are each labelled with their name: no legend there
    fig.tight_layout()
    place_labels(ax, xs, ys, texts, fontsize=MIN_FONT, colours=colours, lines=lines)
    place_labels(right, list(paper[X]), list(paper[Y]), [short(t) for t in paper.label], fontsize=MIN_FONT)
    return fig


def caption(study, table: pd.DataFrame) -> str:
    """The trade-off figure's caption: both panels and their measures."""
    measures = " / ".join(sorted(set(table.loc[table.kind != "paper", "measure"])))
    return setting(study, f"Relevance against instruction following (p-MRR), x100. Left, this kit ({measures}): "
                          "each model at Base (filled circle) and under each instruction variant (open circle, named; "
                          "Paraphrases: the mean of three), Human (star), the facet hybrid over a = 0 to 1 (line; "
                          "a = 1.0 is the plain model, a = 0.0 the Aspect-subset query) and its weight chosen on "
                          "each fold's dev half (diamond). Right, the paper's published points (NDCG@20 and p-MRR of "
                          "its Tables 1 and 2; full corpus, hub models): context, not the same setting. Points at "
                          "one place share a label.")
