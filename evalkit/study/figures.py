"""Save tables (CSV, Markdown, LaTeX) and figures (PNG, SVG) deterministically, and the
study's plain figures. Byte-identical on rerun: fixed SVG ids (``svg.hashsalt``), no
timestamps or software versions in the files.

Figures a paper can print: one colour per model across every figure (`colour_of`: by the
model's place in `config/models.yaml`; the paper's published rows by their place in the
published file; Human black), bootstrap 95% intervals as error bars (`evalkit.study.steps.intervals`), the
kit's rows and the paper's in separate panels, model names on the axis rather than in a long
legend, labels placed without overlaps (`place_labels`), tick labels of at least `MIN_FONT` pt at
the saved size, and a caption saved beside every figure (``NAME.caption.txt``) that `image`
shows under it, in the notebook and so in the HTML report."""

from __future__ import annotations

import base64
import html
import math
from functools import cache
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from evalkit.core.errors import DeclarationError
from evalkit.data.runs import write_atomic
from evalkit.models import registry
from evalkit.study.printed import save_table  # noqa: F401  (figures.save_table: the notebooks' name)
from evalkit.study.published import load_published

FACET_COLUMNS = {"background": "Background", "method": "Method", "result": "Result", "all": "Agg."}
HUMAN_COLOUR = "#000000"
PAPER_HUMAN_COLOUR = "#555555"
MIN_FONT = 8.0  # pt: the smallest text of a saved figure
KIT_PANEL = "this kit"
PAPER_PANEL = "the paper (Mysore et al.; full corpus, hub models)"


def save_figure(fig: plt.Figure, name: str, fig_dir: Path, caption: str) -> list[Path]:
    """Write `name`.png, `name`.svg (no timestamps, fixed SVG ids) and `name`.caption.txt, which
    `image` shows under the figure, and close the figure. Every figure has a caption."""
    if not str(caption).strip():
        raise DeclarationError(f"figure {name}", "give it a caption (what it shows and the setting)")
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = [fig_dir / f"{name}.png", fig_dir / f"{name}.svg"]
    with plt.rc_context({"svg.hashsalt": "evalkit"}):
        fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
        fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    write_atomic(caption_path(paths[0]), caption.strip() + "\n")
    return paths


def caption_path(figure: Path) -> Path:
    """Where a figure's caption is saved: NAME.caption.txt beside NAME.png."""
    return Path(figure).with_suffix(".caption.txt")


def caption(study, shows: str) -> str:
    """A figure caption: what it shows, then the setting (profile, protocol, tag, models, measure, seeds)."""
    return f"{shows.strip()} Setting: profile {study.profile}, protocol {study.protocol}; {study.describe()}."


# --- colours ---------------------------------------------------------------------------------------


@cache
def _palette() -> list[str]:
    """Distinct colours, enough for every model of models.yaml and the paper's rows together."""
    from matplotlib.colors import to_hex

    found: list[str] = []
    for name in ("tab10", "Dark2", "Set1", "tab20b", "Accent", "tab20c"):
        found += [c for c in map(to_hex, plt.get_cmap(name).colors) if c not in found]
    return [c for c in found if c not in (HUMAN_COLOUR, PAPER_HUMAN_COLOUR, "#7f7f7f")]


def _model_colours() -> dict[str, str]:
    """Model name and label -> colour, one palette for the kit's models (by their first place over
    the profiles of models.yaml) and then the paper's published models: a published model the kit
    also runs (SciNCL, Specter2, otAspire, GritLM-7B) takes the kit model's colour, every other one
    a colour no kit model has; no two different models share a colour in any panel."""
    palette = _palette()
    names: list[str] = []
    for profile in registry.profiles():
        names += [n for n in registry.model_names(profile) if n not in names]
    colours = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    for profile in registry.profiles():
        for name in registry.model_names(profile):
            colours.setdefault(registry.spec(name, profile).label, colours[name])
    used = len(names)
    for name in dict.fromkeys(load_published().model):
        if name == "Human":
            continue
        if name not in colours:
            colours[name] = palette[used % len(palette)]
            used += 1
        colours[f"{name} (paper)"] = colours[name]
    return colours


_MODEL_COLOURS: dict[str, str] = {}


def colour_of(key: str) -> str:
    """The one colour of a model (name or table label) in every figure; Human black, the paper's
    Human dark grey; a published row ("NAME (paper)") the colour of that model; a model outside
    the registry (an ``st:`` spec, a Python object) the next colour no other model has."""
    key = str(key)
    if key == "Human (paper)":
        return PAPER_HUMAN_COLOUR
    if key == "human" or key.startswith("Human"):
        return HUMAN_COLOUR
    if not _MODEL_COLOURS:
        _MODEL_COLOURS.update(_model_colours())
    if key not in _MODEL_COLOURS:
        palette = _palette()
        taken = set(_MODEL_COLOURS.values())
        free = [c for c in palette if c not in taken] or palette
        _MODEL_COLOURS[key] = free[0]
    return _MODEL_COLOURS[key]


def is_paper(row) -> bool:
    """A published row of the paper (not computed by the kit)."""
    return str(row.get("source", "kit")) != "kit"


# --- label placement ------------------------------------------------------------------------------


def _overlap(a, b) -> float:
    dx = min(a[2], b[2]) - max(a[0], b[0])
    dy = min(a[3], b[3]) - max(a[1], b[1])
    return dx * dy if dx > 0 and dy > 0 else 0.0


def _along(path, step: float) -> list[tuple[float, float]]:
    """Pixel points every `step` px along a polyline (pixel coordinates)."""
    out = []
    for (x0, y0), (x1, y1) in zip(path[:-1], path[1:]):
        n = max(int(math.hypot(x1 - x0, y1 - y0) / step), 1)
        out += [(x0 + (x1 - x0) * t / n, y0 + (y1 - y0) * t / n) for t in range(n + 1)]
    return out


def place_labels(ax, xs, ys, texts, fontsize: float = 6, colours=None, radius: float = 4.0, lines=()) -> list:
    """Annotate points without overlapping labels: points at the same place share one label (joined
    by " / "); then, greedily in order, each label takes the first candidate position around its
    point (8 directions, growing distance) whose box overlaps no placed label, no other point and no
    drawn line (`lines`: (xs, ys) polylines in data coordinates); a label never leaves the axes. A
    label moved away from its point gets a thin leader line. Deterministic (no randomness, fixed
    candidate order). Returns the annotations."""
    fig = ax.figure
    colours = list(colours) if colours is not None else ["black"] * len(texts)
    merged: dict[tuple, list[int]] = {}
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x is None or y is None or (isinstance(x, float) and math.isnan(x)) or \
                (isinstance(y, float) and math.isnan(y)):
            continue
        merged.setdefault((round(float(x), 6), round(float(y), 6)), []).append(i)
    renderer = fig.canvas.get_renderer()
    points = {key: ax.transData.transform(key) for key in merged}
    box = ax.get_window_extent(renderer)
    marker = 4.0 * fig.dpi / 72  # half a marker, in pixels
    obstacles = [(px - marker, py - marker, px + marker, py + marker) for px, py in points.values()]
    thick = 1.5 * fig.dpi / 72
    for line_xs, line_ys in lines:
        path = [tuple(ax.transData.transform((x, y))) for x, y in zip(line_xs, line_ys)]
        obstacles += [(x - thick, y - thick, x + thick, y + thick) for x, y in _along(path, thick)]
    pad = 2.0 * fig.dpi / 72  # a little air around each label
    placed, annotations = [], []
    directions = [(1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1)]
    for key, members in merged.items():
        label = " / ".join(dict.fromkeys(str(texts[i]) for i in members))
        colour = colours[members[0]]
        px, py = points[key]
        probe = ax.annotate(label, key, fontsize=fontsize)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        width, height = extent.width, extent.height
        own = (px - marker, py - marker, px + marker, py + marker)
        best, best_cost = None, math.inf
        for step in range(0, 24):
            distance = (radius + 6.0 * step) * fig.dpi / 72
            for dx, dy in directions:
                left = px + dx * distance - (width if dx < 0 else 0 if dx > 0 else width / 2)
                bottom = py + dy * distance - (height if dy < 0 else 0 if dy > 0 else height / 2)
                candidate = (left - pad, bottom - pad, left + width + pad, bottom + height + pad)
                inside = candidate[0] >= box.x0 and candidate[2] <= box.x1 and \
                    candidate[1] >= box.y0 and candidate[3] <= box.y1
                cost = sum(_overlap(candidate, other) for other in placed)
                cost += sum(_overlap(candidate, o) for o in obstacles if o != own)
                cost += 0 if inside else 1e12  # never outside the axes (a cut label)
                if cost < best_cost:
                    best, best_cost = (candidate, dx, dy, distance), cost
                if cost == 0:
                    break
            if best_cost == 0:
                break
        candidate, dx, dy, distance = best
        placed.append(candidate)
        offset_pts = ((candidate[0] + pad - px) * 72 / fig.dpi, (candidate[1] + pad - py) * 72 / fig.dpi)
        far = distance > (radius + 1) * fig.dpi / 72
        annotations.append(ax.annotate(
            label, key, xytext=offset_pts, textcoords="offset points", fontsize=fontsize, color=colour,
            ha="left", va="bottom",
            arrowprops={"arrowstyle": "-", "color": "grey", "linewidth": 0.4, "shrinkA": 0, "shrinkB": 2}
            if far else None))
    return annotations


def write_lines(lines: list[str], path: Path) -> Path:
    """A plain-text record (e.g. the findings), one statement per line."""
    write_atomic(Path(path), "\n".join(lines) + "\n")
    return Path(path)


def _paper_label(row) -> str:
    label = str(row["label"])
    return label if label.endswith(" (paper)") else f"{label} (paper)"


def facet_bars(table: pd.DataFrame, metric: str, intervals: pd.DataFrame | None = None) -> plt.Figure:
    """Horizontal bars, one panel per facet (and Agg.), one bar per row in table order, model names on
    the axis: the kit's rows (top panels) in their model colours with bootstrap 95% error bars
    (`intervals`, from `evalkit.study.steps.intervals`; else a table's ci_low/ci_high on Agg. only), the paper's
    published rows (bottom panels) in theirs; the x axis names the measure of each block."""
    rows = table.to_dict("records")
    kit = [r for r in rows if not is_paper(r)]
    paper = [r for r in rows if is_paper(r)]
    blocks = [(KIT_PANEL, kit, metric), (PAPER_PANEL, paper, _paper_measure(paper, metric))]
    blocks = [b for b in blocks if b[1]]
    facets = list(FACET_COLUMNS)
    heights = [max(len(b[1]), 2) for b in blocks]
    fig, axes = plt.subplots(len(blocks), len(facets), figsize=(13, 1.2 + 0.28 * sum(heights) + 0.9 * len(blocks)),
                             squeeze=False, sharey="row", gridspec_kw={"height_ratios": heights})
    bounds = {}
    if intervals is not None:
        bounds = {(r["label"], r["facet"]): (r["ci_low"], r["ci_high"]) for r in intervals.to_dict("records")}
    values = [float(r.get(f, math.nan)) for r in rows for f in facets]
    spans = [v for v in values if not math.isnan(v)] + [float(b) for pair in bounds.values() for b in pair
                                                       if not math.isnan(float(b))]
    low, high = min(0.0, *spans), max(0.0, *spans)
    pad = 0.05 * (high - low or 1)
    for (title, block, measure), row_axes in zip(blocks, axes):
        labels = [_paper_label(r) if title == PAPER_PANEL else str(r["label"]) for r in block]
        ys = np.arange(len(block))
        for ax, facet in zip(row_axes, facets):
            widths = [float(r.get(facet, math.nan)) for r in block]
            ax.barh(ys, widths, height=0.7, color=[colour_of(label) for label in labels])
            if title == KIT_PANEL:
                _error_bars(ax, block, facet, widths, ys, bounds)
            ax.axvline(0, color="black", linewidth=0.6)
            ax.set_xlim(low - pad, high + pad)
            ax.set_title(FACET_COLUMNS[facet], fontsize=10)
            ax.set_xlabel(f"{measure} (x100)" + ("" if title == KIT_PANEL else ", as published"),
                          fontsize=MIN_FONT + 1)
            ax.tick_params(labelsize=MIN_FONT + 1)
            ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
            ax.set_axisbelow(True)
        row_axes[0].set_yticks(ys, [label.removesuffix(" (paper)") for label in labels])
        row_axes[0].invert_yaxis()
        row_axes[0].set_ylabel(title, fontsize=10)
    fig.tight_layout()
    return fig


def _paper_measure(paper: list[dict], metric: str) -> str:
    """The measure the paper's rows report: their `measure` column, else the kit's metric."""
    found = {str(r["measure"]).removesuffix(" (paper)") for r in paper if isinstance(r.get("measure"), str)}
    return found.pop() if len(found) == 1 else metric


def _error_bars(ax, block, facet, widths, ys, bounds) -> None:
    spans = []
    for row in block:
        span = bounds.get((row["label"], facet))
        if span is None and not bounds and facet == "all":
            span = (row.get("ci_low", math.nan), row.get("ci_high", math.nan))
        spans.append(span or (math.nan, math.nan))
    known = [j for j, (lo, hi) in enumerate(spans) if not (math.isnan(float(lo)) or math.isnan(float(hi)))]
    if known:
        lower = [max(widths[j] - float(spans[j][0]), 0) for j in known]
        upper = [max(float(spans[j][1]) - widths[j], 0) for j in known]
        ax.errorbar([widths[j] for j in known], ys[known], xerr=[lower, upper], fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=2)


def sensitivity_limits(table: pd.DataFrame, measure: str) -> tuple[float, float]:
    """The relevance panel's y range: from a multiple of 5 below every interval to one above."""
    low = table[["ci_low", measure]].min().min() if "ci_low" in table else table[measure].min()
    high = table[["ci_high", measure]].max().max() if "ci_high" in table else table[measure].max()
    if math.isnan(low) or math.isnan(high):  # no row ran (every row "not run: <reason>"): the full scale
        return 0, 100
    return 5 * math.floor(low / 5 - 1e-9), 5 * math.ceil(high / 5 + 1e-9)


def sensitivity_plot(table: pd.DataFrame, measure: str) -> plt.Figure:
    """`measure` and p-MRR (x100) per instruction variant, one marker series per model (variants are
    categories: no line joins them; a model's points side by side, offset), each point with its
    bootstrap 95% interval (`tables.sensitivity_table`); the relevance axis spans
    `sensitivity_limits`, the p-MRR axis includes 0."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    variants = list(dict.fromkeys(table["variant"]))
    labels = list(dict.fromkeys(table["label"]))
    offsets = (np.arange(len(labels)) - (len(labels) - 1) / 2) * min(0.12, 0.6 / max(len(labels), 1))
    for ax, metric, (lo, hi) in zip(axes, [measure, "p-MRR"], [("ci_low", "ci_high"), ("pmrr_ci_low", "pmrr_ci_high")]):
        for offset, label in zip(offsets, labels):
            rows = table[table["label"] == label].set_index("variant").reindex(variants)
            xs = np.arange(len(variants)) + offset
            errors = None
            if lo in rows and hi in rows:
                errors = [(rows[metric] - rows[lo]).clip(lower=0), (rows[hi] - rows[metric]).clip(lower=0)]
            ax.errorbar(xs, rows[metric], yerr=errors, marker="o", markersize=5, linestyle="none", elinewidth=1.2,
                        capsize=3, color=colour_of(label), label=label)
        ax.set_xticks(np.arange(len(variants)), [v.replace(" (", "\n(") for v in variants], fontsize=MIN_FONT + 1)
        ax.tick_params(axis="y", labelsize=MIN_FONT + 1)
        ax.set_ylabel(f"{metric} (x100, all queries)", fontsize=10)
        ax.grid(axis="y", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
    axes[0].set_ylim(*sensitivity_limits(table, measure))
    axes[1].axhline(0, color="black", linewidth=0.6)
    fig.tight_layout()
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(names), 3),
               fontsize=MIN_FONT + 1, frameon=False)  # under the panels; the saved figure's tight box holds it
    return fig


def sensitivity_caption(study, table: pd.DataFrame) -> str:
    """The sensitivity figure's caption, with the relevance axis' range as drawn."""
    low, high = sensitivity_limits(table, study.measure)
    return caption(study, f"{study.measure} (left) and p-MRR (right), x100 over all queries, per instruction "
                          "variant (Paraphrases: the mean of three), one marker per model (no line joins the "
                          "variants); error bars: bootstrap 95% intervals of the per-query mean. The left axis "
                          f"runs from {low:.0f} to {high:.0f}, not from 0; the right axis includes 0.")


class Figure:
    """A saved figure for display: the PNG with its caption (NAME.caption.txt) underneath, as HTML
    (what JupyterLab and the HTML report show), plus the plain PNG."""

    def __init__(self, path: Path):
        self.path = Path(path)
        captioned = caption_path(self.path)
        self.caption = captioned.read_text(encoding="utf-8").strip() if captioned.is_file() else ""

    def _repr_mimebundle_(self, include=None, exclude=None):
        data = self.path.read_bytes()
        encoded = base64.b64encode(data).decode("ascii")
        name = html.escape(self.path.stem)
        body = f'<img src="data:image/png;base64,{encoded}" style="max-width:100%" alt="{name}"/>'
        if self.caption:
            body += (f'<figcaption style="font-size:90%;margin:0.3em 0 1.2em 0"><b>Figure ({name}).</b> '
                     f"{html.escape(self.caption)}</figcaption>")
        return {"text/html": f"<figure style=\"margin:0\">{body}</figure>", "image/png": encoded,
                "text/plain": self.caption or self.path.name}


def image(path: Path) -> Figure:
    """A saved PNG for display in a notebook (and so in the HTML report), its caption under it."""
    return Figure(path)
