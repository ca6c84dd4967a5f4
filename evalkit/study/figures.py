"""Save tables (CSV, Markdown, LaTeX) and figures (PNG, SVG) deterministically, and the
study's plain figures. Byte-identical on rerun: fixed SVG ids (``svg.hashsalt``), no
timestamps or software versions in the files.

Figures a paper can print: one colour per model across every figure (`colour_of`: by the
model's place in `config/models.yaml`, the paper's published rows hatched in their own
colours, Human black), bootstrap 95% intervals as error bars (`facet_intervals`), the paper's
rows beside the kit's, labels placed without overlaps (`place_labels`), and a caption saved
beside each figure (``NAME.caption.txt``) that `image` shows under it, in the notebook and so
in the HTML report."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import base64  # noqa: E402
import hashlib  # noqa: E402
import html  # noqa: E402
import math  # noqa: E402
from functools import cache  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from evalkit.runs import write_atomic  # noqa: E402

FACET_COLUMNS = {"background": "Background", "method": "Method", "result": "Result", "all": "Agg."}
HUMAN_COLOUR = "#000000"
PAPER_HATCH = "////"
# The paper's published rows (config/published_mysore.csv), each its own muted colour.
PAPER_COLOURS = {"Human": "#555555", "SciNCL": "#b09c85", "Specter2": "#8491b4", "otAspire": "#91d1c2",
                 "GritLM-7B": "#dc9f9f", "gpt-4o PRP": "#c4a5d8", "Llama-3-70B PRP": "#e0c879"}
PAPER_EXTRA = ("#e5c494", "#b3b3b3", "#fccde5", "#bebada", "#ffed6f", "#ccebc5", "#bc80bd", "#fdb462",
               "#80b1d3", "#b3de69")  # other published rows, by a stable hash of the name


def save_table(table: pd.DataFrame, name: str, out_dir: Path) -> list[Path]:
    """Write `name`.csv (full precision) and, for reading, .md and .tex (`evalkit.study.printed`:
    two decimals, p-values to three significant figures, blanks for missing values, LaTeX-escaped
    text in a booktabs tabular) under out_dir."""
    from evalkit.study import printed

    out_dir = Path(out_dir)
    paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
    write_atomic(paths[0], table.to_csv(index=False))
    write_atomic(paths[1], printed.markdown(table))
    write_atomic(paths[2], printed.latex(table))
    return paths


def save_figure(fig: plt.Figure, name: str, fig_dir: Path, caption: str | None = None) -> list[Path]:
    """Write `name`.png and `name`.svg (no timestamps, fixed SVG ids) and close the figure; with a
    caption, also `name`.caption.txt, which `image` shows under the figure."""
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = [fig_dir / f"{name}.png", fig_dir / f"{name}.svg"]
    with plt.rc_context({"svg.hashsalt": "evalkit"}):
        fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
        fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    if caption:
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
def _model_colours() -> dict[str, str]:
    """Model name and label -> colour, by the model's first place over the profiles of models.yaml."""
    from matplotlib.colors import to_hex

    from evalkit.models import registry

    palette = [to_hex(c) for c in [*plt.get_cmap("tab10").colors, *plt.get_cmap("Dark2").colors]]
    names: list[str] = []
    for profile in registry.profiles():
        names += [n for n in registry.model_names(profile) if n not in names]
    colours = {}
    for i, name in enumerate(names):
        colours[name] = palette[i % len(palette)]
    for profile in registry.profiles():
        for name in registry.model_names(profile):
            colours.setdefault(registry.spec(name, profile).label, colours[name])
    return colours


def colour_of(key: str) -> str:
    """The one colour of a model (name or table label) in every figure; Human black, the paper's rows
    their own; anything else a fixed grey."""
    key = str(key)
    if key.endswith(" (paper)"):
        paper = key.removesuffix(" (paper)")
        if paper in PAPER_COLOURS:
            return PAPER_COLOURS[paper]
        digest = int(hashlib.sha256(paper.encode()).hexdigest(), 16)  # stable across runs and figures
        return PAPER_EXTRA[digest % len(PAPER_EXTRA)]
    if key == "human" or key.startswith("Human"):
        return HUMAN_COLOUR
    return _model_colours().get(key, "#7f7f7f")


def is_paper(row) -> bool:
    """A published row of the paper (not computed by the kit)."""
    return str(row.get("source", "kit")) != "kit"


# --- bootstrap intervals ------------------------------------------------------------------------


def facet_intervals(values: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Bootstrap 95% intervals (x100, as the tables) of the per-query mean of `metric` for each label
    and facet, and over all queries ("all"), from per-query values (`evalkit.study.per_query.values`:
    columns label, facet, metric)."""
    from evalkit.stats import bootstrap_ci
    from evalkit.study.params import BOOTSTRAP_SEED

    rows = []
    for label, group in values.groupby("label", sort=False):
        for facet in FACET_COLUMNS:
            chosen = group[metric] if facet == "all" else group.loc[group.facet == facet, metric]
            chosen = chosen.dropna()
            low, high = bootstrap_ci(chosen, seed=BOOTSTRAP_SEED) if len(chosen) >= 2 else (math.nan, math.nan)
            rows.append({"label": label, "facet": facet, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=["label", "facet", "ci_low", "ci_high"])


# --- label placement ------------------------------------------------------------------------------


def _overlap(a, b) -> float:
    dx = min(a[2], b[2]) - max(a[0], b[0])
    dy = min(a[3], b[3]) - max(a[1], b[1])
    return dx * dy if dx > 0 and dy > 0 else 0.0


def place_labels(ax, xs, ys, texts, fontsize: float = 6, colours=None, radius: float = 4.0) -> list:
    """Annotate points without overlapping labels: points at the same place share one label (joined
    by " / "); then, greedily in order, each label takes the first candidate position around its
    point (8 directions, growing distance) whose box overlaps no placed label, no other point and
    stays inside the axes; a label moved away from its point gets a thin leader line.
    Deterministic (no randomness, fixed candidate order). Returns the annotations."""
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
        for step in range(0, 12):
            distance = (radius + 6.0 * step) * fig.dpi / 72
            for dx, dy in directions:
                left = px + dx * distance - (width if dx < 0 else 0 if dx > 0 else width / 2)
                bottom = py + dy * distance - (height if dy < 0 else 0 if dy > 0 else height / 2)
                candidate = (left - pad, bottom - pad, left + width + pad, bottom + height + pad)
                inside = candidate[0] >= box.x0 and candidate[2] <= box.x1 and \
                    candidate[1] >= box.y0 and candidate[3] <= box.y1
                cost = sum(_overlap(candidate, other) for other in placed)
                cost += sum(_overlap(candidate, o) for o in obstacles if o != own)
                cost += 0 if inside else width * height
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


def facet_bars(table: pd.DataFrame, metric: str, intervals: pd.DataFrame | None = None) -> plt.Figure:
    """Grouped bars: one group per facet (and Agg.), one bar per row, in table order: the kit's rows
    in their model colours with bootstrap 95% error bars (`intervals`, from `facet_intervals`; else a
    table's ci_low/ci_high on Agg. only), the paper's published rows beside them, hatched."""
    rows = table.to_dict("records")
    facets = list(FACET_COLUMNS)
    width = 0.8 / max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(min(13, max(9, 0.6 * len(rows) + 5)), 4.8))
    bounds = {}
    if intervals is not None:
        bounds = {(r["label"], r["facet"]): (r["ci_low"], r["ci_high"]) for r in intervals.to_dict("records")}
    for i, row in enumerate(rows):
        xs = np.arange(len(facets)) + (i - (len(rows) - 1) / 2) * width
        heights = [float(row.get(f, math.nan)) for f in facets]
        paper = is_paper(row)
        colour = colour_of(row["label"]) if not paper else colour_of(row["label"] if str(
            row["label"]).endswith(" (paper)") else f"{row['label']} (paper)")
        ax.bar(xs, heights, width=width, color=colour, edgecolor="black" if paper else colour, linewidth=0.4,
               hatch=PAPER_HATCH if paper else None, label=row["label"])
        if paper:
            continue
        spans = [bounds.get((row["label"], f), (math.nan, math.nan)) for f in facets]
        if not bounds and not (isinstance(row.get("ci_low"), float) and math.isnan(row.get("ci_low"))):
            spans = [(math.nan, math.nan)] * (len(facets) - 1) + [(row.get("ci_low", math.nan),
                                                                   row.get("ci_high", math.nan))]
        known = [j for j, (lo, hi) in enumerate(spans) if not (math.isnan(float(lo)) or math.isnan(float(hi)))]
        if known:
            lower = [max(heights[j] - float(spans[j][0]), 0) for j in known]
            upper = [max(float(spans[j][1]) - heights[j], 0) for j in known]
            ax.errorbar(xs[known], [heights[j] for j in known], yerr=[lower, upper], fmt="none", ecolor="black",
                        elinewidth=0.7, capsize=2)
    ax.set_xticks(np.arange(len(facets)), [FACET_COLUMNS[f] for f in facets])
    ax.set_ylabel(f"{metric} (x100)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def sensitivity_plot(table: pd.DataFrame, measure: str) -> plt.Figure:
    """`measure` and p-MRR per instruction variant, one line per model."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, [measure, "p-MRR"]):
        sns.pointplot(data=table, x="variant", y=metric, hue="label", ax=ax,
                      palette={label: colour_of(label) for label in table["label"].unique()})
        ax.set_xlabel("")
        ax.set_ylabel(f"{metric} (x100)")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# Captions of figures saved without one (by kind, the name's part before the build tag).
DEFAULT_CAPTIONS = {
    "tradeoff": "Relevance (NDCG@20) against instruction following (p-MRR), x100: every kit model at Base and "
                "under each instruction variant (variants in grey), Human, the paper's published points (squares, "
                "full corpus) and the facet hybrid's curve over a (its cross-validated point a diamond); points at "
                "one place share a label.",
    "sensitivity": "The relevance measure and p-MRR (x100, aggregated) per instruction variant, one line per model.",
}


def default_caption(path: Path) -> str:
    """A figure's caption when none was saved: its kind's text and the build tag from the file name."""
    stem = Path(path).stem
    kind = next((k for k in sorted(DEFAULT_CAPTIONS, key=len, reverse=True) if stem.startswith(f"{k}-")), None)
    return f"{DEFAULT_CAPTIONS[kind]} Setting: build tag {stem[len(kind) + 1:]}." if kind else ""


class Figure:
    """A saved figure for display: the PNG with its caption (NAME.caption.txt) underneath, as HTML
    (what JupyterLab and the HTML report show), plus the plain PNG."""

    def __init__(self, path: Path):
        self.path = Path(path)
        captioned = caption_path(self.path)
        self.caption = captioned.read_text(encoding="utf-8").strip() if captioned.is_file() \
            else default_caption(self.path)

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
